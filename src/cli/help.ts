/**
 * What `--help` prints: the usage and each command's help, beside the commands (main.ts) and for
 * docs/commands.md (scripts/docs/commands.ts), which is written from them and COMMAND_FLAGS.
 */
import { AUDIT_HELP } from "./audit.ts";
import { TRACE_HELP } from "./trace.ts";
import { CHECK_HELP } from "./check.ts";
import { DLQ_HELP } from "./dlq.ts";
import { GENERATE_HELP } from "./generate.ts";
import { MIGRATE_HELP, TOPICS_HELP } from "./admin-commands.ts";
import { RUN_HELP } from "./run.ts";
import { configHelp } from "../config.ts";
import { VERSION } from "../version.ts";

/** Where `probe` asks without a URL: the stats server's readiness at its defaults. */
export const PROBE_DEFAULT_URL = "http://127.0.0.1:8081/readyz";

/** Each command's line in the usage, and its summary in docs/commands.md. */
export const SUMMARIES: Readonly<Record<string, { usage: string; summary: string }>> = {
  run: { usage: "run", summary: "consume and ingest (the default command)" },
  check: {
    usage: "check",
    summary: "check configuration, topics, table, grants and key as run would; consume nothing",
  },
  migrate: {
    usage: "migrate",
    summary: "create the ClickHouse database and table; print or make the worker's role",
  },
  topics: { usage: "topics ensure|describe", summary: "create or repair the Kafka topics; show them" },
  generate: { usage: "generate", summary: "send synthetic CDRs to the raw topic" },
  dlq: {
    usage: "dlq inspect|replay",
    summary: "counts and samples of the DLQ; send DLQ payloads back to the raw topic",
  },
  audit: {
    usage: "audit",
    summary: "reconcile Kafka's records with ClickHouse's rows and the DLQ: missing, twice, both",
  },
  trace: {
    usage: "trace <raw_id>",
    summary: "where a record is: stored, dead-lettered, not yet consumed, gone (or --partition P --offset O)",
  },
  probe: {
    usage: "probe [URL]",
    summary: "print what URL (default: the local /readyz) answers; exit 0 on 200: health checks",
  },
  version: { usage: "version", summary: "print the version, the commit it was built from, and librdkafka's version" },
};

export const USAGE = `cdr-worker ${VERSION}: telecom CDR ingest worker
(Kafka → validate/normalize → ClickHouse, bad records → DLQ)

Usage: cdr-worker [command] [--help]
Commands:
${Object.values(SUMMARIES)
  .map(({ usage, summary }) => `  ${usage.padEnd(24)}${summary}`)
  .join("\n")}

Configuration (environment variables):
${configHelp()}`;

export const HELP: Record<string, string> = {
  run: RUN_HELP,
  check: CHECK_HELP,
  migrate: MIGRATE_HELP,
  topics: TOPICS_HELP,
  generate: GENERATE_HELP,
  dlq: DLQ_HELP,
  audit: AUDIT_HELP,
  trace: TRACE_HELP,
  version: "cdr-worker version: print the version, the commit it was built from and the librdkafka version it loads.",
  probe: `cdr-worker probe [--post] [URL]: GET URL (default ${PROBE_DEFAULT_URL}), print the status and the first
  4 KiB of the body (/readyz's reasons); exit 0 on HTTP 200, 1 otherwise (2 s timeout). For container health
  checks and runbooks: the distroless image has no curl. --post sends a POST: the operator's word to a worker
  on this host, such as http://127.0.0.1:8081/internal/breaker/reset (a tripped DLQ breaker).`,
};

