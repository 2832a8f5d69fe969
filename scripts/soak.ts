/**
 * Soak: the worker under a steady load for a while; reports the slope of RSS and event-loop lag,
 * the most rows ever buffered, the lag at the end, and whether any record went missing.
 * Usage: bun scripts/soak.ts [--seconds 600] [--rate 10000] [--binary ./cdr-worker]
 * (services running: scripts/services.sh start). Exit 1 when a record is missing or lag remains.
 */
import { readFileSync } from "node:fs";
import { parseArgs, numberFlag, stringFlag } from "../src/cli/args.ts";
import { createClient } from "@clickhouse/client";
import { migrate } from "../src/clickhouse/migrate.ts";
import { SyntheticCdrs } from "../src/generate/synthetic.ts";
import { Admin } from "../src/kafka/admin.ts";
import { Producer } from "../src/kafka/producer.ts";
import { ensureTopics, topologySpec } from "../src/topics/topology.ts";

const args = parseArgs(process.argv.slice(2));
const seconds = numberFlag(args, "seconds", 600, 5, 86_400);
const rate = numberFlag(args, "rate", 10_000, 10, 1e6);
const binary = stringFlag(args, "binary");
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092";
const chUrl = process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123";
const stamp = Date.now().toString(36);
const raw = `soak.raw.${stamp}`, dlq = `soak.dlq.${stamp}`, table = `soak_${stamp}`;

const admin = new Admin({ "bootstrap.servers": brokers });
await ensureTopics(admin, topologySpec(raw, dlq));
const ch = createClient({ url: chUrl });
await migrate(ch, "soak", table);
const port = 18200 + Math.floor(Math.random() * 500);
const env = { ...process.env, KAFKA_BROKERS: brokers, CLICKHOUSE_URL: chUrl, KAFKA_TOPIC_RAW: raw, KAFKA_TOPIC_DLQ: dlq, KAFKA_GROUP_ID: `soak-${stamp}`,
  CLICKHOUSE_DATABASE: "soak", CLICKHOUSE_TABLE: table, STATS_HOST: "127.0.0.1", STATS_PORT: String(port), LOG_LEVEL: "warn", BUN_JSC_forceRAMSize: "1073741824" };
const worker = Bun.spawn(binary ? [binary, "run"] : ["bun", `${import.meta.dir}/../src/main.ts`, "run"], { env, stdout: "inherit", stderr: "inherit" });
const stats = async () => (await fetch(`http://127.0.0.1:${port}/internal/stats`)).json() as Promise<Record<string, any>>;
for (let i = 0; ; i++) { try { await stats(); break; } catch { if (i > 200) throw new Error("worker did not start"); await Bun.sleep(50); } }

const gen = new SyntheticCdrs({ seed: 7, invalidShare: 0.03, idPrefix: `soak${stamp}` });
const producer = new Producer({ "bootstrap.servers": brokers, "linger.ms": "10" });
const samples: Array<{ t: number; rssMiB: number; loopLagMs: number; buffered: number; lag: number }> = [];
const started = performance.now();
let produced = 0;
let nextSample = 0;
while (performance.now() - started < seconds * 1000) {
  const elapsed = (performance.now() - started) / 1000;
  const due = Math.floor(elapsed * rate) - produced;
  if (due > 0) {
    const n = Math.min(due, 5000);
    await producer.produceBatch(raw, Array.from({ length: n }, () => gen.next().text));
    produced += n;
  }
  if (elapsed >= nextSample) {
    const s = await stats();
    const lag = Object.values(s.partitions as Record<string, { lag: number | null }>).reduce((a, p) => a + (p.lag ?? 0), 0);
    samples.push({ t: elapsed, rssMiB: Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${worker.pid}/status`, "utf8"))?.[1] ?? 0) / 1024, loopLagMs: s.event_loop_lag_ms, buffered: s.buffered_rows, lag });
    nextSample += 1;
  }
  await Bun.sleep(10);
}
// Let it drain, then compare.
const drainDeadline = Date.now() + 60_000;
let final = await stats();
while (final.total_processed < produced && Date.now() < drainDeadline) { await Bun.sleep(200); final = await stats(); }
worker.kill("SIGTERM");
const exitCode = await worker.exited;
producer.close();

/** Least-squares slope of y over t, per minute. */
function slopePerMinute(ys: number[], ts: number[]): number {
  const n = ys.length, mt = ts.reduce((a, b) => a + b, 0) / n, my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0, den = 0;
  for (let i = 0; i < n; i++) { num += (ts[i]! - mt) * (ys[i]! - my); den += (ts[i]! - mt) ** 2; }
  return den ? (num / den) * 60 : 0;
}
// Skip the first fifth: JIT warm-up and heap growth to its working size are not a leak.
const steady = samples.slice(Math.floor(samples.length / 5));
const ts = steady.map((s) => s.t);
const report = {
  seconds, rate, produced, processed: final.total_processed, lost: produced - final.total_processed, worker_exit_code: exitCode,
  rss_mib: { first: Math.round(steady[0]?.rssMiB ?? 0), last: Math.round(steady.at(-1)?.rssMiB ?? 0), max: Math.round(Math.max(...samples.map((s) => s.rssMiB))), slope_per_min: +slopePerMinute(steady.map((s) => s.rssMiB), ts).toFixed(2) },
  event_loop_lag_ms: { max: Math.max(...samples.map((s) => s.loopLagMs)), slope_per_min: +slopePerMinute(steady.map((s) => s.loopLagMs), ts).toFixed(2) },
  buffered_rows_max: Math.max(...samples.map((s) => s.buffered)),
  kafka_lag: { max: Math.max(...samples.map((s) => s.lag)), slope_per_min: +slopePerMinute(steady.map((s) => s.lag), ts).toFixed(1) },
};
console.log(JSON.stringify(report));
// Clean up after reporting: a slow DROP on a big table must not hide the figures.
await ch.command({ query: `DROP TABLE IF EXISTS soak.${table}` }).catch((e) => console.error(`cleanup: ${(e as Error).message}`));
await ch.close().catch(() => {});
await admin.deleteTopics([raw, dlq]).catch(() => {});
admin.close();
process.exit(report.lost === 0 && exitCode === 0 ? 0 : 1);
