/**
 * The DLQ table's filler's cost beside the worker's, on one machine in one run: N envelopes filled
 * into the DLQ table by `dlq fill` (fill.ts: signed, with the worker's headers, every MAC checked)
 * and N raw records (3 % invalid) drained by the worker at its defaults (drain.ts), in alternated
 * pairs (the first of each pair alternates too). Each figure is CPU µs over the whole process
 * (start-up included) and sustained (without the start: the filler from its first row, the worker
 * from the first scrape that saw a record processed). Prints each run, then the medians, and the
 * median of the pairs' ratios filler / worker: what "its CPU an envelope within twice the worker's a
 * record" is held to.
 * Usage: bun scripts/bench/dlq-fill-cost.ts [N=300000] [pairs=3] [binary=bun src/main.ts]
 * (services running; nothing else heavy: it compares CPU)
 */
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { drainOnce, type Drain } from "./drain.ts";
import { fillOnce, type Fill } from "./fill.ts";

const N = Number(process.argv[2] ?? 300_000);
const PAIRS = Number(process.argv[3] ?? 3);
const binary = process.argv[4];

const texts = (() => {
  const g = new SyntheticCdrs({ seed: 7, invalidShare: 0.03, idPrefix: `fillcost${process.pid}` });
  return Array.from({ length: N }, () => g.next().text);
})();

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const summary = (xs: number[]) => ({ median: +median(xs).toFixed(2), min: Math.min(...xs), max: Math.max(...xs) });

const fills: Fill[] = [];
const drains: Drain[] = [];
for (let pair = 0; pair < PAIRS; pair++) {
  const steps = [
    async () => {
      const f = await fillOnce(N, {}, binary);
      fills.push(f);
      console.log(JSON.stringify({ pair, filler: f }));
    },
    async () => {
      const d = await drainOnce(texts, {}, binary);
      drains.push(d);
      console.log(JSON.stringify({ pair, worker: d }));
    },
  ];
  if (pair % 2) steps.reverse();
  for (const step of steps) await step();
}

const ratios = (f: (x: Fill) => number, w: (x: Drain) => number) =>
  summary(fills.map((x, i) => +(f(x) / w(drains[i]!)).toFixed(2)));
console.log(
  JSON.stringify({
    records: N,
    pairs: PAIRS,
    filler_us_per_envelope: summary(fills.map((f) => f.filler_us_per_envelope)),
    worker_us_per_record: summary(drains.map((d) => d.worker_us_per_record)),
    ratio: ratios((f) => f.filler_us_per_envelope, (d) => d.worker_us_per_record),
    sustained_filler_us_per_envelope: summary(fills.map((f) => f.sustained_filler_us_per_envelope)),
    sustained_worker_us_per_record: summary(drains.map((d) => d.sustained_worker_us_per_record)),
    sustained_ratio: ratios((f) => f.sustained_filler_us_per_envelope, (d) => d.sustained_worker_us_per_record),
  }),
);
