/**
 * Soak: the worker under a steady load for a while; reports the slope of RSS and event-loop lag,
 * the most rows ever buffered, the lag at the end, and whether any record went missing.
 * Usage: bun scripts/soak.ts [--seconds 600] [--rate 10000] [--binary ./cdr-worker]
 * (services running: scripts/services.sh start). Exit 1 when a record is missing or lag remains.
 */
import { numberFlag, parseFlags, stringFlag, FLAG } from "../src/cli/args.ts";
import { SyntheticCdrs } from "../src/generate/synthetic.ts";
import { Producer } from "../src/kafka/producer.ts";
import { prepareRun } from "./lib/harness.ts";

const args = parseFlags(process.argv.slice(2), { seconds: FLAG.value, rate: FLAG.value, binary: FLAG.value }, "soak");
const seconds = numberFlag(args, "seconds", 600, 5, 86_400);
const rate = numberFlag(args, "rate", 10_000, 10, 1e6);
const run = await prepareRun("soak", "soak");
const { stats } = run;
const worker = await run.startWorker({ binary: stringFlag(args, "binary") });

const gen = new SyntheticCdrs({ seed: 7, invalidShare: 0.03, idPrefix: `soak${run.table}` });
const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "10" });
const samples: Array<{ t: number; rssMiB: number; loopLagMs: number; buffered: number; lag: number }> = [];
const started = performance.now();
let produced = 0;
let nextSample = 0;
while (performance.now() - started < seconds * 1000) {
  const elapsed = (performance.now() - started) / 1000;
  const due = Math.floor(elapsed * rate) - produced;
  if (due > 0) {
    const n = Math.min(due, 5000);
    await producer.produceBatch(run.raw, Array.from({ length: n }, () => gen.next().text));
    produced += n;
  }
  if (elapsed >= nextSample) {
    const s = await stats();
    const lag = Object.values(s.partitions as Record<string, { lag: number | null }>).reduce((a, p) => a + (p.lag ?? 0), 0);
    samples.push({ t: elapsed, rssMiB: run.rssMiB(worker.pid), loopLagMs: s.event_loop_lag_ms, buffered: s.buffered_rows, lag });
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
await run.cleanup();
process.exit(report.lost === 0 && exitCode === 0 ? 0 : 1);
