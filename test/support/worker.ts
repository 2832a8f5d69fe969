/** Runs the real worker (`bun src/main.ts run`, or the compiled binary) against the real services. */
import type { Subprocess } from "bun";
import { mkdirSync, rmSync } from "node:fs";
import { Admin } from "../../src/kafka/admin.ts";
import { ensureTopics, topologySpec } from "../../src/topics/topology.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { CLICKHOUSE_URL, KAFKA_BROKERS, ROOT, uniqueName, waitFor } from "./services.ts";
import { props } from "./kafka.ts";
import { forEachLine } from "./lines.ts";

export interface Names {
  raw: string;
  dlq: string;
  group: string;
  database: string;
  table: string;
  /** The ClickHouse that holds the table (CLICKHOUSE_URL of the worker). */
  clickhouseUrl: string;
}

/** Fresh topics (spec settings), group and table (on the ClickHouse at `clickhouseUrl`) for one test. */
export async function freshNames(prefix: string, clickhouseUrl = CLICKHOUSE_URL): Promise<Names> {
  const n: Names = { raw: uniqueName(`${prefix}.raw`), dlq: uniqueName(`${prefix}.dlq`), group: uniqueName(`${prefix}-g`), database: "e2e", table: uniqueName(prefix).replace(/\W/g, "_"), clickhouseUrl };
  const admin = new Admin(props);
  try {
    await ensureTopics(admin, topologySpec(n.raw, n.dlq));
  } finally {
    admin.close();
  }
  const ch = createClickHouse({ url: clickhouseUrl, user: "default", password: "", database: "default", table: n.table, requestTimeoutMs: 10_000 }, "default");
  try {
    await migrate(ch, n.database, n.table);
  } finally {
    await ch.close();
  }
  return n;
}

export function workerEnv(n: Names, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH!,
    KAFKA_BROKERS,
    KAFKA_TOPIC_RAW: n.raw,
    KAFKA_TOPIC_DLQ: n.dlq,
    KAFKA_GROUP_ID: n.group,
    CLICKHOUSE_URL: n.clickhouseUrl,
    CLICKHOUSE_DATABASE: n.database,
    CLICKHOUSE_TABLE: n.table,
    STATS_HOST: "127.0.0.1",
    STATS_PORT: "0",
    BATCH_FLUSH_INTERVAL_SECONDS: "0.2",
    // As the Dockerfile sets it: JSC sizes its heap from the RAM it sees (24 GiB here).
    BUN_JSC_forceRAMSize: "1073741824",
    // No key unless a test gives one: the suites test delivery, and a test of the key gives it. `run`
    // refuses exactly-once without a key unless DLQ_PROVENANCE=unsigned says so.
    ...(extra.DLQ_PROVENANCE_KEY || extra.DLQ_PROVENANCE_KEY_FILE ? {} : { DLQ_PROVENANCE: "unsigned" }),
    ...extra,
  };
}

export interface RunningWorker {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  statsUrl: string;
  /** Its log lines but debug ones (those are in `logFile` alone). */
  logs: string[];
  /** Every line it wrote, kept unless it stopped cleanly with no record handed out again (.local/test-logs/). */
  logFile: string;
  stats: () => Promise<Record<string, any>>;
  stop: (signal?: NodeJS.Signals) => Promise<number>;
}

// Every worker a test starts is killed when the test process ends, whatever the test did:
// a failed assertion must not leave a worker polling in the background of later tests.
const live = new Set<Subprocess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

/** Kills workers a failed test left running (call in afterAll). */
export function killLeftoverWorkers(): void {
  for (const p of live) p.kill("SIGKILL");
}

let started = 0;

/** Where each worker's whole log goes while it runs. */
export const WORKER_LOG_DIR = `${ROOT}/.local/test-logs`;

/**
 * librdkafka's fetch, topic and consumer debug in the worker's log file: what a pause and a resume
 * did, fetch by fetch, for a run where librdkafka hands out records twice (records_repeated).
 */
export function withFetchDebug(env: Record<string, string>): Record<string, string> {
  return { ...env, KAFKA_PROP_DEBUG: "fetch,topic,consumer", LOG_LEVEL: "debug" };
}

/**
 * Starts the worker and waits until its stats server answers. Each gets a WORKER_INSTANCE of its own
 * unless `env` names one: two workers of a group with the same one fence each other's transactions.
 */
export async function startWorker(env: Record<string, string>, cmd: string[] = ["bun", `${ROOT}/src/main.ts`, "run"]): Promise<RunningWorker> {
  const instance = env.WORKER_INSTANCE ?? `e2e-worker-${++started}`;
  const proc = Bun.spawn(cmd, { env: { WORKER_INSTANCE: instance, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  live.add(proc);
  void proc.exited.then(() => live.delete(proc));
  mkdirSync(WORKER_LOG_DIR, { recursive: true });
  const logFile = `${WORKER_LOG_DIR}/${instance}-${proc.pid}.log`;
  const file = Bun.file(logFile).writer();
  const logs: string[] = [];
  let statsUrl = "";
  const read = forEachLine(proc.stderr, (line) => {
    file.write(`${line}\n`);
    if (line.includes('"level":"debug"')) return;
    logs.push(line);
    const m = line.match(/"stats":"http:\/\/[^:]+:(\d+)\//);
    if (m) statsUrl = `http://127.0.0.1:${m[1]}`;
  });
  await waitFor(() => (statsUrl ? true : proc.exitCode !== null ? (() => { throw new Error(`worker exited ${proc.exitCode}: ${logs.join("\n")}`); })() : undefined), 30_000, "worker start");
  const stats = async () => (await fetch(`${statsUrl}/internal/stats`)).json() as Promise<Record<string, any>>;
  return {
    proc,
    statsUrl,
    logs,
    logFile,
    stats,
    stop: async (signal = "SIGTERM") => {
      const repeated = await stats().then((s) => Number(s.records_repeated ?? 0), () => 0);
      proc.kill(signal);
      const code = await proc.exited;
      await read;
      await file.end();
      if (repeated > 0) console.log(`${instance}: librdkafka handed out ${repeated} records again; its whole log: ${logFile}`);
      else if (code === 0) rmSync(logFile, { force: true });
      return code;
    },
  };
}

/** Polls /readyz until it answers 503; returns the reasons it gives. */
export async function notReadyReasons(w: RunningWorker, ms: number, what: string): Promise<string[]> {
  return waitFor(async () => {
    const r = await fetch(`${w.statsUrl}/readyz`);
    return r.status === 503 ? ((await r.json()) as { reasons: string[] }).reasons : undefined;
  }, ms, what);
}

/** The stats a failure shows: where the records are, and what the worker waits for. */
const STATS_SHOWN = ["state", "total_consumed", "total_clickhouse", "total_dlq", "buffered_rows", "in_flight_buffer", "commits",
  "commits_refused", "dlq_producer_renewals", "assignments_lost", "records_repeated", "records_expired", "replay_checks_pending", "assigned_partitions", "ready", "partitions"];

/**
 * Runs `fn`; when it throws, the error carries the worker's stats then and its own last log lines, so
 * a failure in CI says why.
 */
export async function explainedBy<T>(worker: RunningWorker | (() => RunningWorker), fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    // A getter names the worker running at the failure, where a test starts one again.
    const w = typeof worker === "function" ? worker() : worker;
    // A worker ended by a signal (a crash) has no exit code, only the signal.
    const exited = w.proc.signalCode
      ? ` (the worker was ended by ${w.proc.signalCode})`
      : w.proc.exitCode === null ? "" : ` (the worker exited ${w.proc.exitCode})`;
    const last = await w.stats().catch(() => undefined);
    const stats = last ? JSON.stringify(Object.fromEntries(STATS_SHOWN.map((k) => [k, last[k]]))) : "(none)";
    // A line per partition as well: CI's summary cuts long lines, and a stalled partition is the usual why.
    const partitions = Object.entries((last?.partitions ?? {}) as Record<string, unknown>).map(([p, v]) => `  partition ${p}: ${JSON.stringify(v)}`);
    // The worker's own lines say which way it went; librdkafka's (reconnects, mostly) would crowd them out.
    const own = w.logs.filter((l) => !l.includes('"component":"librdkafka"')).slice(-20);
    throw new Error(`${(e as Error).message}${exited}\n${partitions.join("\n")}\nlast stats: ${stats}\nworker log (its own last 20 lines; all of it in ${w.logFile}):\n${own.join("\n")}`, { cause: e });
  }
}

/** Polls the stats endpoint until `pred` holds; returns the stats that satisfied it. */
export async function statsWhen(w: RunningWorker, pred: (s: Record<string, any>) => boolean, ms = 30_000, what = "stats condition"): Promise<Record<string, any>> {
  return explainedBy(w, () => waitFor(async () => {
    const s = await w.stats();
    return pred(s) ? s : undefined;
  }, ms, what));
}
