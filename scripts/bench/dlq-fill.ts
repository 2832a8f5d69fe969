/**
 * What filling the DLQ table costs (`dlq fill`): a backlog of N envelopes (with the worker's headers,
 * signed) is filled from a standing start (fill.ts), giving envelopes/s and the filler's CPU per
 * envelope; then, caught up, one envelope every 50 ms for 10 s, giving the lag from the DLQ's
 * acknowledgement of an envelope to its row being readable, at each flush interval asked.
 * Its cost beside the worker's: dlq-fill-cost.ts.
 * Usage: bun scripts/bench/dlq-fill.ts [envelopes=100000] [flush seconds=2,0.2] [binary=bun src/main.ts]
 * (services running; nothing else heavy: it compares CPU)
 */
import { benchEnvelope, fillOnce } from "./fill.ts";

const N = Number(process.argv[2] ?? 100_000);
const FLUSHES = (process.argv[3] ?? "2,0.2").split(",").map(Number);
const binary = process.argv[4];

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

for (const flush of FLUSHES) {
  const lags: number[] = [];
  let rows = 0;
  const fill = await fillOnce(N, { BATCH_FLUSH_INTERVAL_SECONDS: String(flush) }, binary, async (r) => {
    for (let i = 0; i < 200; i++) {
      const e = benchEnvelope(N + i, r.key);
      const report = await r.producer.produce(r.run.dlq, e.value, { headers: e.headers });
      const acked = performance.now();
      const q = `SELECT count() FROM ${r.run.database}.${r.run.table}_dlq WHERE dlq_offset = ${report.offset}`;
      while (Number((await (await r.run.ch.query({ query: q, format: "TabSeparated" })).text()).trim()) === 0)
        await Bun.sleep(5);
      lags.push(performance.now() - acked);
      await Bun.sleep(Math.max(0, 50 - (performance.now() - acked)));
    }
    rows = await r.rows();
  });
  console.log(
    JSON.stringify({
      flush_interval_s: flush,
      backlog: N,
      ...fill,
      lag_ms: { p50: Math.round(pct(lags, 50)), p95: Math.round(pct(lags, 95)), max: Math.round(Math.max(...lags)) },
      rows,
    }),
  );
}
