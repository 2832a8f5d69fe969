#!/usr/bin/env bun
/** cdr-worker: CLI and wiring only. How it ends: src/exits.ts (docs/exit-codes.md). */
import { auditCommand } from "./cli/audit.ts";
import { checkCommand } from "./cli/check.ts";
import { dlqCommand } from "./cli/dlq.ts";
import { generateCommand } from "./cli/generate.ts";
import { migrateCommand, topicsCommand } from "./cli/admin-commands.ts";
import { numberFlag, parseArgs, UsageError } from "./cli/args.ts";
import { runCommand } from "./cli/run.ts";
import { HELP, PROBE_DEFAULT_URL, USAGE } from "./cli/help.ts";
import { configHelp, kafkaPropVariable, loadConfig } from "./config.ts";
import { ConfigError, type CdrWorkerError } from "./errors.ts";
import { classifyFailure } from "./cli/failure.ts";
import { EXITS, type ExitKind } from "./exits.ts";
import { refusedProps } from "./kafka/handle.ts";
import { coreDumps, largeBlocksMapped } from "./kafka/libc.ts";
import { librdkafkaVersion, setLibrdkafkaPath } from "./kafka/native.ts";
import { log, setLogLevel } from "./log.ts";
import { commit, VERSION } from "./version.ts";
import { probeCommand } from "./cli/probe.ts";
import { traceCommand } from "./cli/trace.ts";
import { followSaslPassword } from "./kafka/sasl-credentials.ts";

/** Properties whose values never reach a log or an error line. */
const SECRET_PROP = /pass(word)?|secret|token|key/i;

async function main(argv: string[]): Promise<ExitKind> {
  // Before anything else: the environment already holds the secrets a core would keep.
  if (!coreDumps.off()) log.warn("could not turn core dumps off (setrlimit refused)");
  // Before librdkafka's first fetch: its large buffers go back to the kernel when freed.
  if (!largeBlocksMapped()) log.warn("could not set malloc's mmap threshold (mallopt refused)");
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
    console.log(`${VERSION} (commit ${commit()}) ${engine}`);
    return "OK";
  }
  if (command === "probe") return probeCommand(args.positionals[1] ?? PROBE_DEFAULT_URL, args.flags.has("post"));
  const cfg = loadConfig();
  setLogLevel(cfg.logLevel);
  if (cfg.coreDumps && !coreDumps.restore()) log.warn("CORE_DUMPS=on: could not restore the core file size limit");
  setLibrdkafkaPath(cfg.librdkafkaPath);
  const saslFile = cfg.kafka.propFiles["sasl.password"];
  if (saslFile !== undefined) followSaslPassword(saslFile, cfg.kafka.props["sasl.password"] ?? "");
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
    case "check":
      return checkCommand(cfg, {
        offline: args.flags.has("offline"),
        waitSeconds: numberFlag(args, "wait", 0, 0, 3600),
      });
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
    case "trace":
      return traceCommand(cfg, args);
  }
  return "USAGE";
}

/** The exit a command's failure ends in, after its line. */
function failure(e: unknown): ExitKind {
  if (e instanceof UsageError) {
    console.error(`cdr-worker ${e.command}: ${e.message}\n\n${HELP[e.command] ?? USAGE}`);
    return "USAGE";
  }
  const { kind, line } = classifyFailure(e);
  // A runtime failure is a log line like every other the worker writes while running.
  if (kind === "FAILED") log.error("failed", { err: e as Error, code: (e as CdrWorkerError).code });
  else console.error(line);
  return kind;
}

const ended = await main(process.argv.slice(2)).catch(failure);
// Native handles (librdkafka threads, sockets) must not keep a finished command alive.
process.exit(EXITS[ended].code);
