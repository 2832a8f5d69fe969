/**
 * What the benchmark, soak and chaos scripts share: fresh topics (spec settings) and table, the
 * worker's environment, starting it as a subprocess, reading its stats and RSS, and cleaning up.
 * Services must be running (scripts/services.sh start).
 */
import { createClient, type ClickHouseClient } from "@clickhouse/client";
import { readdirSync, readFileSync } from "node:fs";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { ensureTopics, topologySpec } from "../../src/topics/topology.ts";

const MAIN = `${import.meta.dir}/../../src/main.ts`;

export interface Harness {
  brokers: string;
  raw: string;
  /** The raw topic's partition count. */
  partitions: number;
  dlq: string;
  database: string;
  table: string;
  ch: ClickHouseClient;
  /** The worker's environment for this run, plus overrides. */
  env(extra?: Record<string, string>): Record<string, string | undefined>;
  /** Starts `cdr-worker run` (the binary when given, else `bun src/main.ts`) and waits for its stats server. */
  startWorker(opts?: { binary?: string; extra?: Record<string, string> }): Promise<Bun.Subprocess>;
  stats(): Promise<Record<string, any>>;
  /** The group's commits of every raw partition at its end, asked of Kafka (committedToEnd). */
  committedToEnd(): Promise<boolean>;
  rssMiB(pid: number): number;
  /** utime + stime of a process so far, in seconds (all its threads). */
  cpuSeconds(pid: number): number;
  /** The same per thread group of a Bun process: main (JS), jit, gc, librdkafka, other. */
  threadCpuSeconds(pid: number): Record<ThreadGroup, number>;
  /** Drops the table and topics; failures are reported, not thrown (a report must not be lost to cleanup). */
  cleanup(): Promise<void>;
}

export type ThreadGroup = "main" | "jit" | "gc" | "librdkafka" | "other";

/** Which job a thread of a Bun process does, by its name (/proc/<pid>/task/<tid>/comm). */
function threadGroup(pid: number, tid: number, comm: string): ThreadGroup {
  if (tid === pid) return "main";
  if (/^rdk:/.test(comm)) return "librdkafka";
  if (/JIT|Compil|DFG|FTL/i.test(comm)) return "jit";
  if (/Heap|GC|Marking|Helper/i.test(comm)) return "gc";
  return "other";
}

/** utime + stime of /proc/<pid>[/task/<tid>]/stat, in seconds (ticks of 1/100 s). */
function statCpu(path: string): number {
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The pid of a service scripts/services.sh started (its pid file under .local/), or null. */
export function servicePid(name: "kafka" | "clickhouse"): number | null {
  try {
    return Number(readFileSync(`${import.meta.dir}/../../.local/${name}/${name}.pid`, "utf8").trim()) || null;
  } catch {
    return null;
  }
}

/** CPU seconds of a process (all threads), 0 when it is not there. */
export function processCpuSeconds(pid: number | null): number {
  try {
    return pid ? statCpu(`/proc/${pid}/stat`) : 0;
  } catch {
    return 0;
  }
}

/**
 * Every partition committed to its end, `committed` and `ends` by partition as Kafka has them: the
 * drain is over, not only read, and under exactly-once every envelope before those commits is
 * visible in the DLQ. Read from the group, not the worker's stats: those list a partition only once
 * a record of it is handed over, so one still paused for its replay check, or one a killed worker
 * finished, is missing from them.
 */
export function committedToEnd(committed: ReadonlyMap<number, number>, ends: ReadonlyMap<number, number>): boolean {
  return ends.size > 0 && [...ends].every(([p, end]) => (committed.get(p) ?? -1) >= end);
}

export async function prepareRun(prefix: string, database: string): Promise<Harness> {
  const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092";
  const chUrl = process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123";
  const stamp = Date.now().toString(36);
  const raw = `${prefix}.raw.${stamp}`, dlq = `${prefix}.dlq.${stamp}`, table = `${prefix}_${stamp}`, group = `${prefix}-${stamp}`;
  const admin = new Admin({ "bootstrap.servers": brokers });
  const topics = topologySpec(raw, dlq);
  await ensureTopics(admin, topics);
  const partitions = topics.find((t) => t.name === raw)!.partitions;
  const ch = createClient({ url: chUrl, request_timeout: 60_000 });
  await migrate(ch, database, table);
  const port = 18200 + Math.floor(Math.random() * 1000);
  const env = (extra: Record<string, string> = {}) => ({
    ...process.env, KAFKA_BROKERS: brokers, CLICKHOUSE_URL: chUrl, KAFKA_TOPIC_RAW: raw, KAFKA_TOPIC_DLQ: dlq, KAFKA_GROUP_ID: group,
    CLICKHOUSE_DATABASE: database, CLICKHOUSE_TABLE: table, STATS_HOST: "127.0.0.1", STATS_PORT: String(port), LOG_LEVEL: "warn",
    // As in the image: JSC sizes its heap for 1 GiB instead of the host's RAM.
    BUN_JSC_forceRAMSize: "1073741824",
    // Exactly-once's default: envelopes signed, as production runs.
    DLQ_PROVENANCE_KEY: "bench-provenance-key-0123456789abcdef0123",
    ...extra,
  });
  const stats = async () => (await fetch(`http://127.0.0.1:${port}/internal/stats`)).json() as Promise<Record<string, any>>;
  const all = Array.from({ length: partitions }, (_, partition) => partition);
  return {
    brokers, raw, partitions, dlq, database, table, ch, env, stats,
    async committedToEnd() {
      const [commits, ends] = await Promise.all([
        admin.committed(group, all.map((partition) => ({ topic: raw, partition }))),
        admin.listOffsets(raw, all, "latest"),
      ]);
      return committedToEnd(new Map(commits.map((c) => [c.partition, c.offset !== undefined ? Number(c.offset) : -1])), ends);
    },
    async startWorker(opts = {}) {
      // BENCH_BUN_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the worker itself.
      const flags = (process.env.BENCH_BUN_FLAGS ?? "").split(" ").filter(Boolean);
      const cmd = opts.binary ? [opts.binary, "run"] : ["bun", ...flags, MAIN, "run"];
      const proc = Bun.spawn(cmd, { env: env(opts.extra), stdout: "inherit", stderr: "inherit" });
      for (let i = 0; ; i++) {
        try {
          await stats();
          return proc;
        } catch {
          if (i > 400 || proc.exitCode !== null) throw new Error("worker did not start");
          await Bun.sleep(50);
        }
      }
    },
    rssMiB: (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024,
    cpuSeconds: (pid) => statCpu(`/proc/${pid}/stat`),
    threadCpuSeconds: (pid) => {
      const out: Record<ThreadGroup, number> = { main: 0, jit: 0, gc: 0, librdkafka: 0, other: 0 };
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        try {
          const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
          out[threadGroup(pid, Number(tid), comm)] += statCpu(`/proc/${pid}/task/${tid}/stat`);
        } catch {
          // The thread ended between the listing and the read.
        }
      }
      return out;
    },
    async cleanup() {
      for (const name of [`${table}_offsets_mv`, `${table}_offsets`, table, `${table}_dlq_summary`, `${table}_dlq`])
        await ch.command({ query: `DROP TABLE IF EXISTS ${database}.${name}` }).catch((e) => console.error(`cleanup: ${(e as Error).message}`));
      await ch.close().catch(() => {});
      await admin.deleteTopics([raw, dlq]).catch(() => {});
      admin.close();
    },
  };
}

/**
 * Reads a DLQ topic (one partition) to its end as a read_committed reader sees it: how many envelopes
 * it holds, and the distinct source records (partition/offset of the raw topic) they stand for:
 * replays make the first larger. Counted by reading, as transaction markers and aborted envelopes
 * take offsets too.
 */
export async function dlqSources(brokers: string, dlq: string, group: string): Promise<{ messages: number; sources: Set<string> }> {
  const reader = new Consumer({
    props: { "bootstrap.servers": brokers, "group.id": group, "enable.partition.eof": "true", "isolation.level": "read_committed" },
    topics: [dlq],
    readHeaders: true,
  });
  const sources = new Set<string>();
  const dec = new TextDecoder();
  let messages = 0;
  try {
    for (;;) {
      const batch = reader.poll();
      if (batch.length === 0) {
        // The end a read_committed reader reaches: the last stable offset.
        const end = reader.endReached(0);
        if (end !== undefined && end >= reader.queryWatermarks(dlq, 0).high) break;
        await reader.waitForMessages(50);
        continue;
      }
      for (const m of batch) {
        const h = Object.fromEntries((m.headers ?? []).map(([k, v]) => [k, dec.decode(v)]));
        sources.add(`${h[HEADERS.sourcePartition]}/${h[HEADERS.sourceOffset]}`);
      }
      messages += batch.length;
    }
    return { messages, sources };
  } finally {
    await reader.close();
  }
}
