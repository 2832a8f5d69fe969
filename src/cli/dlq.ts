/**
 * `dlq inspect` and `dlq replay`: what went to the DLQ, and sending it back after a fix. Both
 * stream (dlq/reader.ts): memory stays bounded whatever the DLQ holds; a replay sends in chunks as
 * it reads, and both print where a later run may resume (`next_offsets`, for `--from-offset`).
 * A replay's position is the first record not replayed: one read but waiting in an unsent chunk
 * holds it back. It stops at --limit, or at SIGINT/SIGTERM (the chunk read so far is sent first;
 * a second signal exits at once), and prints its position whichever way it stopped.
 */
import type { Config } from "../config.ts";
import { DLQ_STAGES, envelopeSource, HEADERS, type DlqStage } from "../dlq/envelope.ts";
import { payloadDigest, type ProvenanceKey } from "../dlq/provenance-mac.ts";
import { provenanceKeyOf } from "./provenance-key.ts";
import { readDlq, type OffsetRange, type ReadProgress, type StoredEnvelope } from "../dlq/reader.ts";
import { CdrWorkerError } from "../errors.ts";
import { exitNow, type ExitKind } from "../exits.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { Producer } from "../kafka/producer.ts";
import { log } from "../log.ts";
import { numberFlag, stringFlag, type ParsedArgs } from "./args.ts";
import { clientProps } from "./kafka-clients.ts";
import { DLQ_FILL_HELP, dlqFillCommand } from "./dlq-fill.ts";
import { queryText, ROWS_ANSWER_BYTES } from "../clickhouse/answer.ts";
import { createClickHouse } from "../clickhouse/client.ts";
import { dlqTable } from "../clickhouse/migrate.ts";
import { parsePredicate, predicateSql } from "../dlq-table/predicate.ts";

export const DLQ_HELP = `cdr-worker dlq inspect [selection] [--samples K]
  Reads KAFKA_TOPIC_DLQ (commits nothing) and prints counts by failure_reason, failed_field and
  stage, plus K samples (default 3) per reason, as JSON.
cdr-worker dlq replay [selection] [--where PREDICATE] [--limit N] [--chunk-size N] [--dry-run]
                      [--unverified]
  Re-publishes the original payloads of the selected DLQ records to KAFKA_TOPIC_RAW, byte for byte,
  as it reads them, N at a time (default 5000). --dry-run sends nothing and lists the first 1000 it
  would send. Stops at --limit or on SIGINT/SIGTERM and prints where to resume. Only envelopes
  DLQ_PROVENANCE_KEY proves a worker wrote for their payload are sent (unproven_envelopes counts the
  others); without the key it sends nothing unless told --unverified (anyone who can write to the
  DLQ topic could then put records into the raw topic). A payload the envelope holds truncated is
  never sent (truncated_payloads counts them): its record is only in the raw topic, at the source
  offset the envelope names.
  --where selects by a predicate on the DLQ table (<table>_dlq, filled by dlq fill): its columns
  compared with literals (= != <> < <= > >=, [NOT] IN (…), IS [NOT] NULL), AND, OR, NOT and
  parentheses, e.g. "failure_reason = 'invalid_rat_value' AND device_id IN ('d1','d2')". The
  envelopes at the offsets it selects are read from the topic and replayed, each only if its payload
  is the one its row was made from (payload_sha256; not_the_rows_payload counts the others: a DLQ
  topic made anew over an old table).
Selection:
  --reason R            failure_reason R
  --stage S             where the record was turned away: decode, clickhouse-refused (ClickHouse
                        refused the row alone), clickhouse-failed (the batch's retries ran out)
  --since ISO --until ISO   failed_at within [since, until)
  --from-offset N --to-offset M   DLQ offsets [N, M) of each partition (default: all present now);
                        both commands print next_offsets, where a later run may go on
  --from-offset P:N[,P:N…]   start partition P at N (only the partitions named are read): what a
                        stopped replay prints as "resume"
Progress goes to stderr on a terminal.
${DLQ_FILL_HELP}`;

/** Most records a dry run lists (it counts them all). */
const DRY_RUN_LISTED = 1000;
/** Records that are not envelopes listed in the summary, with their offsets (all are counted). */
const UNREADABLE_LISTED = 100;
/** Payloads sent to the raw topic in one produce call, by default. */
const REPLAY_CHUNK = 5000;

interface Selection {
  /**
   * --where: the DLQ offsets of each partition the DLQ table selects, with each row's payload_sha256:
   * the record read at that offset is sent only if its payload is the one the row was made from.
   */
  offsets?: ReadonlyMap<number, ReadonlyMap<number, string>>;
  reason?: string;
  stage?: DlqStage;
  since: number | null;
  until: number | null;
  range: OffsetRange;
}

/** DLQ records that are not envelopes: skipped, never sent, each reported on stderr. */
interface Unreadable {
  count: number;
  first: Array<{ partition: number; offset: number; problem: string }>;
}

function selection(args: ParsedArgs): Selection {
  const stage = stringFlag(args, "stage");
  if (stage !== undefined && !DLQ_STAGES.includes(stage as DlqStage))
    throw new CdrWorkerError("CONFIG_INVALID", `--stage=${stage}: expected one of ${DLQ_STAGES.join(", ")}`);
  const offset = (name: string) =>
    args.flags.has(name) ? numberFlag(args, name, 0, 0, Number.MAX_SAFE_INTEGER) : undefined;
  const from = stringFlag(args, "from-offset");
  const starts = from?.includes(":") ? partitionStarts(from) : undefined;
  return {
    reason: stringFlag(args, "reason"),
    stage: stage as DlqStage | undefined,
    since: parseTime(args, "since"),
    until: parseTime(args, "until"),
    range: { from: starts ? undefined : offset("from-offset"), to: offset("to-offset"), starts },
  };
}

/** `0:120,1:55` → partition → first offset. */
function partitionStarts(text: string): Map<number, number> {
  const starts = new Map<number, number>();
  for (const part of text.split(",")) {
    const m = /^\s*(\d+):(\d+)\s*$/.exec(part);
    if (!m) throw new CdrWorkerError("CONFIG_INVALID", `--from-offset=${text}: expected N, or P:N[,P:N…]`);
    starts.set(Number(m[1]), Number(m[2]));
  }
  return starts;
}

/** The flag that resumes where `next` says, for every partition read. */
function resumeFlag(next: ReadonlyMap<number, number>): string {
  return `--from-offset ${[...next].map(([p, o]) => `${p}:${o}`).join(",")}`;
}

/** A word as a POSIX shell reads it back: quoted unless plainly safe. */
const shellWord = (w: string) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`);

/**
 * The whole command that goes on from `next`: this run's flags (its selection, --limit,
 * --chunk-size) with --from-offset replaced. The flag alone would drop the selection, and a resumed
 * `--stage clickhouse-failed` would replay every envelope past the position.
 */
function resumeCommand(args: ParsedArgs, next: ReadonlyMap<number, number>): string {
  const kept = [...args.flags].filter(([name]) => name !== "from-offset" && name !== "help");
  const words = kept.flatMap(([name, v]) => (v === true ? [`--${name}`] : [`--${name}`, v]));
  return ["cdr-worker", "dlq", "replay", ...words, ...resumeFlag(next).split(" ")].map(shellWord).join(" ");
}

function selects(s: Selection, e: StoredEnvelope): boolean {
  if (s.offsets && !s.offsets.get(e.partition)?.has(e.offset)) return false;
  if (s.reason && e.envelope.failure_reason !== s.reason) return false;
  if (s.stage && e.stage !== s.stage) return false;
  const at = Date.parse(e.envelope.failed_at);
  return !((s.since !== null && at < s.since) || (s.until !== null && at >= s.until));
}

/** Reads the selected range; returns the unreadable count and where each partition may resume. */
async function scan(
  cfg: Config,
  range: OffsetRange,
  visit: (e: StoredEnvelope) => void | Promise<void>,
): Promise<{ unreadable: Unreadable; next: Map<number, number> }> {
  const admin = new Admin(clientProps(cfg, "admin"));
  const partitions = admin.partitionCounts([cfg.kafka.topicDlq]).get(cfg.kafka.topicDlq);
  admin.close();
  if (partitions == null) throw new CdrWorkerError("TOPOLOGY", `topic ${cfg.kafka.topicDlq} missing`);
  const consumer = new Consumer({
    props: clientProps(cfg, "dlqReader"),
    topics: [],
    readHeaders: true,
  });
  const unreadable: Unreadable = { count: 0, first: [] };
  const skip = (m: { partition: number; offset: number }, problem: string) => {
    unreadable.count++;
    if (unreadable.first.length < UNREADABLE_LISTED)
      unreadable.first.push({ partition: m.partition, offset: m.offset, problem });
    console.error(`dlq: skipped the record at partition ${m.partition} offset ${m.offset}: ${problem}`);
  };
  const progress = terminalProgress();
  try {
    const next = await readDlq(consumer, cfg.kafka.topicDlq, partitions, range, visit, skip, progress);
    return { unreadable, next };
  } finally {
    progress.end();
    await consumer.close();
  }
}

/** "read N of M" on stderr, twice a second, when stderr is a terminal; nothing otherwise. */
function terminalProgress(): ((p: ReadProgress) => void) & { end(): void } {
  let shown = 0;
  const tty = process.stderr.isTTY === true;
  const show = (p: ReadProgress) => {
    if (!tty || Date.now() - shown < 500) return;
    shown = Date.now();
    const share = Math.floor((100 * p.read) / Math.max(1, p.total));
    process.stderr.write(`\rdlq: read ${p.read} of ${p.total} (${share} %)`);
  };
  return Object.assign(show, { end: () => void (tty && shown && process.stderr.write("\n")) });
}

export async function dlqCommand(cfg: Config, sub: string | undefined, args: ParsedArgs): Promise<ExitKind> {
  if (sub === "inspect") return inspect(cfg, args);
  if (sub === "replay") return replay(cfg, args);
  if (sub === "fill") return dlqFillCommand(cfg);
  console.error(DLQ_HELP);
  return "USAGE";
}

async function inspect(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const samplesPer = numberFlag(args, "samples", 3, 0, 1000);
  const sel = selection(args);
  // Maps: the keys are text from the DLQ, and a key such as __proto__ must count like any other.
  const byReason = new Map<string, number>();
  const byField = new Map<string, number>();
  const byStage = new Map<string, number>();
  const samples = new Map<string, unknown[]>();
  const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  let total = 0;
  const { unreadable, next } = await scan(cfg, sel.range, (e) => {
    if (!selects(sel, e)) return;
    total++;
    const r = e.envelope.failure_reason;
    count(byReason, r);
    count(byField, e.envelope.failed_field ?? "(none)");
    count(byStage, e.stage);
    let list = samples.get(r);
    if (!list) samples.set(r, (list = []));
    if (list.length < samplesPer) list.push({ ...e.envelope, dlq_offset: e.offset, source: e.headers });
  });
  // Object.fromEntries defines each key as an own property, __proto__ included.
  const summary = {
    topic: cfg.kafka.topicDlq,
    total,
    unreadable: unreadable.count,
    unreadable_records: unreadable.first,
    by_reason: Object.fromEntries(byReason),
    by_field: Object.fromEntries(byField),
    by_stage: Object.fromEntries(byStage),
    samples: Object.fromEntries(samples),
    next_offsets: Object.fromEntries(next),
  };
  console.log(JSON.stringify(summary, null, 1));
  return "OK";
}

async function replay(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const sel = await withWhere(cfg, args, selection(args));
  const limit = numberFlag(args, "limit", Number.MAX_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER);
  const dryRun = args.flags.has("dry-run");
  const chunkSize = numberFlag(args, "chunk-size", REPLAY_CHUNK, 1, 100_000);
  const listed: unknown[] = [];
  let chunk: string[] = [];
  let matched = 0;
  let sent = 0;
  // With a key, only envelopes a worker provably wrote for their payload go back (a forged one would
  // put its payload into cdr.raw); the rest are counted.
  const key = provenanceKeyOf(cfg);
  if (!key && !dryRun && !args.flags.has("unverified"))
    throw new CdrWorkerError(
      "CONFIG_INVALID",
      "dlq replay without DLQ_PROVENANCE_KEY cannot tell a worker's envelope from one anyone wrote to the DLQ topic: " +
        "give the workers' key, or say --unverified to send them unproven",
    );
  let unproven = 0;
  let notTheRows = 0;
  let truncated = 0;
  const counts = () => ({ unproven: key ? unproven : null, notTheRows: sel.offsets ? notTheRows : null, truncated });
  // Per partition: the first record of the unsent chunk (it holds the position back), and the next
  // record after the last envelope read (the reader's own `next` once it returns).
  const held = new Map<number, number>();
  let read = new Map<number, number>();
  let stopping: string | null = null;
  const stopOn = (signal: string) => {
    if (stopping) {
      const stop = `second ${signal}`;
      printReplay(dryRun, cfg, args, matched, sent, counts(), listed, position(), null, stop);
      exitNow("REPLAY_SECOND_SIGNAL");
    }
    stopping = signal;
  };
  const onInt = () => stopOn("SIGINT");
  const onTerm = () => stopOn("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  const position = () => new Map([...read].map(([p, o]) => [p, held.get(p) ?? o]));
  const producer = dryRun ? null : new Producer(clientProps(cfg, "replayProducer"));
  const send = async () => {
    if (!producer || chunk.length === 0) return;
    const payloads = chunk;
    chunk = [];
    await producer.produceBatch(cfg.kafka.topicRaw, payloads);
    sent += payloads.length;
    held.clear();
    // Where to go on should the run be killed before its summary (SIGKILL, a node lost): after each
    // acknowledged send, so the last such line resends at most one chunk.
    const at = position();
    const resume_command = resumeCommand(args, at);
    log.info("dlq replay progress", { sent, next_offsets: Object.fromEntries(at), resume_command });
  };
  const range = {
    ...sel.range,
    stop: () => {
      if (matched >= limit) stopping ??= "limit";
      return stopping !== null;
    },
  };
  let unreadable: Unreadable | null = null;
  try {
    let next: Map<number, number>;
    ({ unreadable, next } = await scan(cfg, range, async (e) => {
      read.set(e.partition, e.offset + 1);
      if (!selects(sel, e)) return;
      // The DLQ topic made anew over an old table: another envelope stands at the row's offset now.
      const row = sel.offsets?.get(e.partition)?.get(e.offset);
      if (row !== undefined && row !== payloadDigest(e.payloadText)) {
        notTheRows++;
        return;
      }
      if (key && !provenToSend(key, e)) {
        unproven++;
        return;
      }
      if (holdsTruncated(e)) {
        truncated++;
        return;
      }
      matched++;
      if (dryRun) {
        if (listed.length < DRY_RUN_LISTED)
          listed.push({
            dlq_partition: e.partition,
            dlq_offset: e.offset,
            failure_reason: e.envelope.failure_reason,
            stage: e.stage,
            failed_at: e.envelope.failed_at,
            payload: e.payloadText,
          });
        return;
      }
      // Only envelopes of the exact shape reach here (readEnvelope): every entry of a chunk was
      // checked before the chunk is sent, and a record that is not one was skipped and reported.
      if (!held.has(e.partition)) held.set(e.partition, e.offset);
      chunk.push(e.payloadText);
      if (chunk.length >= chunkSize) await send();
    }));
    read = next;
    await send();
  } catch (e) {
    // A failed send is a stop too: what was acknowledged is where a later run goes on.
    printReplay(dryRun, cfg, args, matched, sent, counts(), listed, position(), unreadable, "error");
    throw e;
  } finally {
    producer?.close();
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
  printReplay(dryRun, cfg, args, matched, sent, counts(), listed, position(), unreadable, stopping);
  return "OK";
}

function printReplay(
  dryRun: boolean,
  cfg: Config,
  args: ParsedArgs,
  matched: number,
  sent: number,
  skipped: { unproven: number | null; notTheRows: number | null; truncated: number },
  listed: unknown[],
  next: Map<number, number>,
  unreadable: Unreadable | null,
  stoppedBy: string | null,
): void {
  console.log(
    JSON.stringify({
      dry_run: dryRun,
      to: cfg.kafka.topicRaw,
      [dryRun ? "would_send" : "sent"]: dryRun ? matched : sent,
      records: dryRun ? listed : undefined,
      unproven_envelopes: skipped.unproven ?? undefined,
      not_the_rows_payload: skipped.notTheRows ?? undefined,
      truncated_payloads: skipped.truncated,
      unreadable: unreadable?.count,
      unreadable_records: unreadable?.first,
      stopped_by: stoppedBy ?? undefined,
      next_offsets: Object.fromEntries(next),
      resume: resumeFlag(next),
      resume_command: resumeCommand(args, next),
    }),
  );
}

/** The cut a truncated payload ends with (dlq/envelope.ts encodeEnvelopeOf). */
const TRUNCATION_MARK = /…\[truncated: \d+ (bytes|characters) in all\]$/;

/**
 * Whether an envelope holds its payload cut short: said by its header, or by the mark the cut leaves
 * (an envelope whose headers were lost or changed). Sending it would put a part of a record, not
 * the record, into the raw topic.
 */
/**
 * Whether the key proves the envelope, and its payload is the record its MAC names (its digest):
 * only such a payload may go back to the raw topic. A cut payload the whole envelope's MAC proves
 * is the worker's, and counted as truncated instead.
 */
function provenToSend(key: ProvenanceKey, e: StoredEnvelope): boolean {
  const src = envelopeSource(e.headers);
  const proof = key.proves(src, e.message);
  if (proof === "whole" && holdsTruncated(e)) return true;
  return proof !== null && src?.digest === payloadDigest(e.payloadText);
}

function holdsTruncated(e: StoredEnvelope): boolean {
  return e.headers[HEADERS.truncated] === "true" || TRUNCATION_MARK.test(e.payloadText);
}

/**
 * The selection narrowed to the offsets `--where` selects in the DLQ table, and the range to what
 * holds them: each partition read from its first selected offset (or the resume position, if later)
 * to past its last. The predicate is parsed before anything is asked of ClickHouse.
 */
async function withWhere(cfg: Config, args: ParsedArgs, sel: Selection): Promise<Selection> {
  const text = stringFlag(args, "where");
  if (text === undefined) return sel;
  const predicate = predicateSql(parsePredicate(text));
  const offsets = await selectedOffsets(cfg, predicate);
  const starts = new Map<number, number>();
  let to = 0;
  for (const [p, rows] of offsets) {
    let first = Infinity, last = -1;
    for (const o of rows.keys()) (first = Math.min(first, o)), (last = Math.max(last, o));
    const resumed = sel.range.starts ? sel.range.starts.get(p) : sel.range.from;
    if (sel.range.starts && resumed === undefined) continue;
    starts.set(p, Math.max(first, resumed ?? first));
    to = Math.max(to, last + 1);
  }
  const range = { ...sel.range, from: undefined, starts, to: Math.min(to, sel.range.to ?? to) };
  return { ...sel, offsets, range };
}

async function selectedOffsets(cfg: Config, predicate: string): Promise<Map<number, Map<number, string>>> {
  const { database, table } = cfg.clickhouse;
  const ch = createClickHouse(cfg.clickhouse);
  try {
    const query =
      `SELECT dlq_partition, dlq_offset, payload_sha256 FROM ${database}.${dlqTable(table)} ` +
      `WHERE failure_reason != '' AND ${predicate} ORDER BY dlq_partition, dlq_offset`;
    const out = new Map<number, Map<number, string>>();
    for (const line of (await queryText(ch, query, ROWS_ANSWER_BYTES)).split("\n").filter(Boolean)) {
      const [p, o, digest] = line.split("\t") as [string, string, string];
      let rows = out.get(Number(p));
      if (!rows) out.set(Number(p), (rows = new Map()));
      rows.set(Number(o), digest);
    }
    return out;
  } finally {
    await ch.close();
  }
}

function parseTime(args: ParsedArgs, name: string): number | null {
  const v = stringFlag(args, name);
  if (v === undefined) return null;
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new CdrWorkerError("CONFIG_INVALID", `--${name}=${v}: expected an ISO 8601 time`);
  return t;
}
