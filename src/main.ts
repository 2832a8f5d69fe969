#!/usr/bin/env bun
/** cdr-worker: CLI and wiring only. How it ends: src/exits.ts (docs/exit-codes.md). */
import { AUDIT_HELP, auditCommand } from "./cli/audit.ts";
import { DLQ_HELP, dlqCommand } from "./cli/dlq.ts";
import { GENERATE_HELP, generateCommand } from "./cli/generate.ts";
import { MIGRATE_HELP, TOPICS_HELP, migrateCommand, topicsCommand } from "./cli/admin-commands.ts";
import { parseArgs, UsageError } from "./cli/args.ts";
import { RUN_HELP, runCommand } from "./cli/run.ts";
import { configHelp, kafkaPropVariable, loadConfig } from "./config.ts";
import { CdrWorkerError, ConfigError, SchemaMismatchError } from "./errors.ts";
import { EXITS, type ExitKind } from "./exits.ts";
import { refusedProps } from "./kafka/handle.ts";
import { coreDumps } from "./kafka/libc.ts";
import { librdkafkaVersion, setLibrdkafkaPath } from "./kafka/native.ts";
import { log, setLogLevel } from "./log.ts";
import { VERSION } from "./version.ts";

const USAGE = `cdr-worker ${VERSION}: telecom CDR ingest worker
(Kafka → validate/normalize → ClickHouse, bad records → DLQ)

Usage: cdr-worker [command] [--help]
Commands:
  run              consume and ingest (default)
  migrate          create the ClickHouse database and table
  topics ensure    create/repair the Kafka topics;  topics describe  show them
  generate         send synthetic CDRs to the raw topic
  dlq inspect      counts and samples of the DLQ;  dlq replay  send DLQ payloads back to the raw topic
  audit            reconcile Kafka's records with ClickHouse's rows and the DLQ: missing, twice, both
  probe URL        exit 0 when URL answers 200 (container health checks: distroless has no curl)
  version          print the version and librdkafka's

Configuration (environment variables):
${configHelp()}`;

/** Properties whose values never reach a log or an error line. */
const SECRET_PROP = /pass(word)?|secret|token|key/i;

const HELP: Record<string, string> = {
  run: RUN_HELP,
  migrate: MIGRATE_HELP,
  topics: TOPICS_HELP,
  generate: GENERATE_HELP,
  dlq: DLQ_HELP,
  audit: AUDIT_HELP,
  version: "cdr-worker version: print the version and the librdkafka version it loads.",
  probe: "cdr-worker probe URL: GET URL; exit 0 on HTTP 200, 1 otherwise (2 s timeout).",
};

async function main(argv: string[]): Promise<ExitKind> {
  // Before anything else: the environment already holds the secrets a core would keep.
  if (!coreDumps.off()) log.warn("could not turn core dumps off (setrlimit refused)");
  const args = parseArgs(argv);
  const command = args.positionals[0] ?? "run";
  if (command === "help" || (args.flags.has("help") && !args.positionals[0])) {
    console.log(USAGE);
    return "OK";
  }
  if (!(command in HELP)) {
    console.error(`cdr-worker: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
    return "USAGE";
  }
  if (args.flags.has("help")) {
    console.log(`${HELP[command]}\n\nConfiguration (environment variables):\n${configHelp()}`);
    return "OK";
  }
  if (command === "version") {
    // The library is whatever LIBRDKAFKA_PATH says, when the configuration can be read at all.
    try {
      setLibrdkafkaPath(loadConfig().librdkafkaPath);
    } catch {}
    let engine: string;
    try {
      engine = `librdkafka ${librdkafkaVersion()}`;
    } catch (e) {
      engine = `librdkafka unavailable: ${(e as Error).message}`;
    }
    console.log(`${VERSION} ${engine}`);
    return "OK";
  }
  if (command === "probe") {
    const url = args.positionals[1] ?? "http://127.0.0.1:8081/readyz";
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => null);
    return res?.status === 200 ? "OK" : "PROBE_FAILED";
  }
  const cfg = loadConfig();
  setLogLevel(cfg.logLevel);
  if (cfg.coreDumps && !coreDumps.restore()) log.warn("CORE_DUMPS=on: could not restore the core file size limit");
  setLibrdkafkaPath(cfg.librdkafkaPath);
  // Every KAFKA_PROP_* through librdkafka's own setter, before any connection: a typo is exit 2.
  const refused = refusedProps(cfg.kafka.props);
  if (refused.length)
    throw new ConfigError(
      refused.map(({ name, reason }) => ({
        variable: kafkaPropVariable(name),
        value: SECRET_PROP.test(name) ? "[redacted]" : cfg.kafka.props[name],
        expected: `librdkafka refuses ${name}: ${reason}`,
      })),
    );
  switch (command) {
    case "run":
      return runCommand(cfg);
    case "migrate":
      return migrateCommand(cfg, args);
    case "topics":
      return topicsCommand(cfg, args);
    case "generate":
      return generateCommand(cfg, args);
    case "dlq":
      return dlqCommand(cfg, args.positionals[1], args);
    case "audit":
      return auditCommand(cfg, args);
  }
  return "USAGE";
}

/** The exit a command's failure ends in, after its line. */
function failure(e: unknown): ExitKind {
  if (e instanceof UsageError) {
    console.error(`cdr-worker ${e.command}: ${e.message}\n\n${HELP[e.command] ?? USAGE}`);
    return "USAGE";
  }
  if (e instanceof ConfigError) {
    console.error(e.message);
    return "CONFIG";
  }
  if (e instanceof SchemaMismatchError) {
    console.error(e.message);
    return "SCHEMA";
  }
  if (e instanceof CdrWorkerError && e.code === "CLICKHOUSE_ACCESS" && !e.retryable) {
    console.error(e.message);
    return "ACCESS";
  }
  if (e instanceof CdrWorkerError && e.code === "CONFIG_INVALID") {
    console.error(`config error: ${e.message}`);
    return "CONFIG";
  }
  log.error("failed", { err: e as Error, code: (e as CdrWorkerError).code });
  return "FAILED";
}

const ended = await main(process.argv.slice(2)).catch(failure);
// Native handles (librdkafka threads, sockets) must not keep a finished command alive.
process.exit(EXITS[ended].code);
