/**
 * Every way the executable ends, one entry each: the closed list every exit goes through (commands
 * return an entry's name; the few that must end at once call exitNow). docs/exit-codes.md is
 * written from it (scripts/docs/exit-codes.ts), and a test holds the page, and the absence of any
 * other exit, to it.
 *
 * The codes keep one meaning each for a supervisor: 0 done; 2 refused before doing anything, and a
 * restart alone cannot help (fix the command line, the configuration, the table or the grants);
 * 1 anything else, which a restart may help or the log line explains.
 */
export interface ExitEntry {
  code: 0 | 1 | 2;
  /** When it happens, and which commands. */
  when: string;
  /** What it prints last (stderr unless it says stdout). */
  says: string;
}

export const EXITS = {
  OK: {
    code: 0,
    when:
      "the command did what it was asked; `run`: stopped by SIGTERM or SIGINT, everything durable " +
      "committed; `audit`: clean; `check`: nothing that would stop `run`",
    says: '`run`: `"stopped cleanly"` with `total_processed`; the other commands: their JSON summary on stdout',
  },
  USAGE: {
    code: 2,
    when: "an unknown command, flag, sub-command or argument",
    says: "`cdr-worker <command>: <problem>`, then the command's help",
  },
  CONFIG: {
    code: 2,
    when:
      "a variable, a `_FILE` or a `KAFKA_PROP_*` the worker or librdkafka refuses (all of them are read " +
      "first); `migrate --user` without `--role` and `--password-file`; `migrate --role` on a server " +
      "older than 20.4; `dlq replay` without `DLQ_PROVENANCE_KEY` or `--unverified`; `audit --resume` with " +
      "`--partitions` or an offset flag",
    says: '`config error: NAME="value": expected …`, one line a problem (or `config error: <problem>`)',
  },
  SCHEMA: {
    code: 2,
    when:
      "`run`, `check`, `migrate`: the ClickHouse table has columns of other types than the worker writes, or " +
      "lacks some `migrate` cannot add",
    says: "`schema error: <db>.<table>: <problem>`, one line a column",
  },
  ACCESS: {
    code: 2,
    when: "`run`, `check`: the worker's ClickHouse user lacks a privilege it needs",
    says: "`ClickHouse user … lacks <privilege> ON <object>, which the worker needs to …`",
  },
  FAILED: {
    code: 1,
    when:
      "any other failure, at start or while running (`check`: at start): a topic or the table missing " +
      "(code `TOPOLOGY`), " +
      "Kafka or ClickHouse failing in a way no retry helps (fenced, refused by an ACL, a DLQ send " +
      "undeliverable), a server unreachable at start",
    says: '`"worker failed"` (`run`) or `"failed"`, with `err` and its `code`',
  },
  SECOND_SIGNAL: {
    code: 1,
    when: "`run`: a second SIGTERM or SIGINT while stopping; nothing that is not durable is committed",
    says: '`"second signal: exiting without committing what is not durable"`',
  },
  SHUTDOWN_TIMEOUT: {
    code: 1,
    when: "`run`: the graceful stop outlasted `SHUTDOWN_TIMEOUT_SECONDS`; nothing that is not durable is committed",
    says: '`"shutdown timed out: exiting without committing what is not durable"`',
  },
  AUDIT_FINDINGS: {
    code: 1,
    when:
      "`audit`: records missing, stored twice, dead-lettered twice, both stored and dead-lettered, or " +
      "rows at offsets with no record; or the DLQ table missing a committed DLQ record, holding one twice, " +
      "or holding one the topic has not committed",
    says: 'its JSON summary on stdout, `"audit":"failed"` with the counts, and the `"dlq_table"` line',
  },
  TRACE_MISSING: {
    code: 1,
    when: "`trace --partition P --offset O`: the record was committed, yet is neither stored nor dead-lettered",
    says: 'its JSON line on stdout, `"verdict":"missing"`',
  },
  REPLAY_SECOND_SIGNAL: {
    code: 1,
    when: "`dlq replay`: a second signal while it sends its last chunk",
    says: "its summary on stdout, with `next_offsets` and `resume` as acknowledged so far",
  },
  PROBE_FAILED: {
    code: 1,
    when: "`probe`: the URL did not answer 200 within 2 s",
    says: "the status and body it answered (stdout), or `probe: no answer from <URL> within 2000 ms: …`",
  },
  PARENT_GONE: {
    code: 1,
    when: "the scheduled audit's child (`AUDIT_INTERVAL_SECONDS`): the worker that started it had already ended",
    says: "nothing",
  },
} as const satisfies Record<string, ExitEntry>;

export type ExitKind = keyof typeof EXITS;

/** Ends the process now with the entry's code: for exits that cannot wait for the command to return. */
export function exitNow(kind: ExitKind): never {
  process.exit(EXITS[kind].code);
}
