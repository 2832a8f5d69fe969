/**
 * `cdr-worker check`: what `run` checks before it starts, without consuming, writing or committing
 * anything, and every problem at once rather than the first. For a deploy step or an init
 * container: it exits with the code `run` would, so a pipeline can refuse a configuration that a
 * worker would refuse minutes later, in a crash loop.
 */
import { queryText, SMALL_ANSWER_BYTES, versionOf } from "../clickhouse/answer.ts";
import { createClickHouseEndpoints } from "../clickhouse/client.ts";
import { OLDEST_TESTED, olderThanTested } from "../clickhouse/server-version.ts";
import { keyRequired, shutdownBelowBudget, type Config } from "../config.ts";
import { CdrWorkerError, ConfigError } from "../errors.ts";
import { EXITS, type ExitKind } from "../exits.ts";
import { classifyFailure, type Failure } from "./failure.ts";
import { Admin } from "../kafka/admin.ts";
import { clientProps } from "./kafka-clients.ts";
import { missingKafkaGrants, transactionalWrite } from "./kafka-grants.ts";
import { clickhousePreflight, compactedRawTopic, decisive, kafkaPreflight } from "./preflight.ts";

export const CHECK_HELP = `cdr-worker check [--offline] [--wait SECONDS]: read the configuration, connect, and check
what run needs: both topics, the group's session (exactly-once with group.protocol=consumer), each ClickHouse
endpoint's table schema and the worker's grants, the Kafka ACLs run needs (group Read, topic Read and
Write, DescribeConfigs, a TransactionalId Write under exactly-once: docs/security.md), the DLQ key,
and each server's version; and refuses a SHUTDOWN_TIMEOUT_SECONDS below one insert's retry budget
and a raw topic whose cleanup.policy compacts, which run only says. Consumes, produces and commits
nothing (under exactly-once it registers the TransactionalId <KAFKA_GROUP_ID>-<WORKER_INSTANCE>-check
to try the grant). One line a problem on
stderr (a warning for an endpoint that fails beside one that passes, as run would start), then a
JSON summary on stdout; exits with the code run would
(2 for that deadline). --offline checks the configuration alone (every variable, KAFKA_PROP_* through
librdkafka's own setter, the files it names, the DLQ key and the deadline) and connects to nothing.
--wait SECONDS checks again every 5 s while a problem remains, up to SECONDS, with one line a try: a
set-up Job started beside topics and migrate passes once they have made what run needs.`;

interface EndpointReport {
  endpoint: string;
  version: string | null;
  passed: boolean;
}

/** Between two checks under --wait. */
const WAIT_STEP_MS = 5_000;

export async function checkCommand(
  cfg: Config,
  opts: { offline?: boolean; waitSeconds?: number } = {},
): Promise<ExitKind> {
  const deadline = performance.now() + (opts.waitSeconds ?? 0) * 1000;
  for (;;) {
    const found = await checkOnce(cfg, opts.offline ?? false);
    const left = deadline - performance.now();
    if (found.problems.length === 0 || left <= 0 || opts.offline)
      return report(cfg, found.problems, found.warnings, found.services);
    // --wait: what an earlier set-up step makes (the topics, the table, the grants) may still come.
    const first = found.problems[0]!.line.split("\n")[0];
    const when = `again in ${WAIT_STEP_MS / 1000} s, ${Math.ceil(left / 1000)} s left`;
    console.error(`check: ${found.problems.length} problems (${first}); ${when}`);
    await Bun.sleep(Math.min(WAIT_STEP_MS, left));
  }
}

async function checkOnce(
  cfg: Config,
  offline: boolean,
): Promise<{ problems: Failure[]; warnings: string[]; services?: object }> {
  // In the order run meets them: the first decides the exit, every one is printed.
  const problems: Failure[] = [];
  const warnings: string[] = [];
  const unkeyed = keyRequired(cfg);
  if (unkeyed) problems.push(classifyFailure(new ConfigError([unkeyed])));
  // run only warns of it; a deploy step that checks refuses it before a stop gives up an insert.
  const short = shutdownBelowBudget(cfg);
  if (short) problems.push(classifyFailure(new ConfigError([short])));
  if (offline) return { problems, warnings };
  let session: Awaited<ReturnType<typeof kafkaPreflight>>["session"];
  let kafkaPassed = false;
  try {
    let rawCompacted: string | null;
    ({ session, rawCompacted } = await kafkaPreflight(cfg));
    kafkaPassed = true;
    // run starts on it and says it; a deploy step refuses it before compaction empties an offset.
    const compacted = rawCompacted && compactedRawTopic(cfg.kafka.topicRaw, rawCompacted);
    if (compacted) problems.push(classifyFailure(new CdrWorkerError("TOPOLOGY", compacted)));
  } catch (e) {
    problems.push(classifyFailure(e));
  }
  if (kafkaPassed) {
    // The grants run needs and would stop on later (a group it may not join, a DLQ it may not write).
    const admin = new Admin(clientProps(cfg, "admin"));
    try {
      const { errors, warnings: weaker } = await missingKafkaGrants(admin, cfg);
      for (const e of errors) problems.push(classifyFailure(e));
      warnings.push(...weaker);
    } finally {
      admin.close();
    }
    const txn = await transactionalWrite(cfg);
    if (txn?.error) problems.push(classifyFailure(txn.error));
    if (txn?.warning) warnings.push(txn.warning);
    kafkaPassed = !problems.some((p) => p.line.startsWith("error KAFKA_ACCESS"));
  }
  const endpoints = createClickHouseEndpoints(cfg.clickhouse);
  const reports: EndpointReport[] = [];
  const failed: Array<{ endpoint: string; error: unknown }> = [];
  try {
    for (const { name, client } of endpoints) {
      // Whatever answers (a proxy's page, nothing), the check goes on: the schema check below says why.
      const version = await queryText(client, "SELECT version()", SMALL_ANSWER_BYTES)
        .then(versionOf)
        .catch(() => null);
      if (version !== null && olderThanTested(version))
        warnings.push(`ClickHouse ${name} is ${version}, older than the oldest tested (${OLDEST_TESTED})`);
      try {
        await clickhousePreflight(cfg, client);
        reports.push({ endpoint: name, version, passed: true });
      } catch (error) {
        reports.push({ endpoint: name, version, passed: false });
        failed.push({ endpoint: name, error });
      }
    }
  } finally {
    await Promise.all(endpoints.map((e) => e.client.close()));
  }
  const named = (endpoint: string, line: string) =>
    endpoints.length > 1 ? line.split("\n").map((l) => `${endpoint}: ${l}`).join("\n") : line;
  if (failed.length === endpoints.length && failed.length > 0) {
    // Every line is printed; the exit is that of the failure run would stop on.
    const retryable = (e: unknown) => e instanceof CdrWorkerError && e.retryable;
    const { kind } = classifyFailure(decisive(failed.map((f) => ({ ...f, retryable: retryable(f.error) }))).error);
    for (const f of failed) problems.push({ kind, line: named(f.endpoint, classifyFailure(f.error).line) });
  } else for (const f of failed) warnings.push(named(f.endpoint, classifyFailure(f.error).line));

  return {
    problems,
    warnings,
    services: {
      kafka: {
        passed: kafkaPassed,
        topics: [cfg.kafka.topicRaw, cfg.kafka.topicDlq],
        ...(session ? { session_timeout_ms: session.sessionTimeoutMs } : {}),
      },
      clickhouse: reports,
    },
  };
}

/** Every problem and warning on a line of its own (stderr), then the JSON summary (stdout); the exit. */
function report(cfg: Config, problems: Failure[], warnings: string[], services?: object): ExitKind {
  for (const p of problems) console.error(p.line);
  for (const w of warnings) console.error(`warning: ${w}`);
  const kind: ExitKind = problems[0]?.kind ?? "OK";
  console.log(
    JSON.stringify({
      check: kind === "OK" ? "passed" : "failed",
      exit: EXITS[kind].code,
      problems: problems.reduce((n, p) => n + p.line.split("\n").length, 0),
      warnings: warnings.length,
      delivery: cfg.delivery,
      dlq_provenance: cfg.dlq.provenanceKey ? "signed" : "unsigned",
      shutdown_timeout_seconds: cfg.shutdownTimeoutMs / 1000,
      ...(services ?? { offline: true }),
    }),
  );
  return kind;
}
