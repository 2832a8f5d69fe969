/**
 * What exactly-once costs beside at-least-once: the same binary, the same backlog (N synthetic
 * records, 3 % invalid, produced once a run into fresh topics), drained with DELIVERY=exactly-once
 * (the default) and with DELIVERY=at-least-once, in alternated pairs (the first of each pair
 * alternates too, so neither mode always runs on a warmer machine). For each run: records/s from the
 * worker's spawn to its last commit (start-up included, as a user meets it) and sustained (from the
 * first scrape that saw a record processed: without the start-up, which under exactly-once waits
 * for the first heartbeat proven), the worker's CPU µs a record, ClickHouse's CPU µs a row and Kafka's µs a record. Per batch size (the default, then 10000): the
 * median of each figure per mode with its spread (min … max), and the median of the pairs' ratios
 * exactly-once / at-least-once. Progress is read as an operator's scraper would, once a second.
 * Usage: bun scripts/bench/delivery-cost.ts [records=300000] [pairs=5] [binary=bun src/main.ts]   (services running)
 */
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { drainOnce, type Drain } from "./drain.ts";

const N = Number(process.argv[2] ?? 300_000);
const PAIRS = Number(process.argv[3] ?? 5);
const binary = process.argv[4];
const SIZES: Array<{ label: string; env: Record<string, string> }> = [
  { label: "defaults", env: {} },
  { label: "BATCH_SIZE=10000", env: { BATCH_SIZE: "10000" } },
];
const MODES = ["exactly-once", "at-least-once"] as const;
type Mode = (typeof MODES)[number];

type Run = Drain;

const texts = (() => {
  const g = new SyntheticCdrs({ seed: 5, invalidShare: 0.03, idPrefix: `cost${process.pid}` });
  return Array.from({ length: N }, () => g.next().text);
})();

const once = (mode: Mode, env: Record<string, string>) => drainOnce(texts, { ...env, DELIVERY: mode }, binary);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const summary = (xs: number[]) => ({ median: +median(xs).toFixed(2), min: Math.min(...xs), max: Math.max(...xs) });

const report: Array<Record<string, unknown>> = [];
for (const size of SIZES) {
  const runs: Record<Mode, Run[]> = { "exactly-once": [], "at-least-once": [] };
  for (let i = 0; i < PAIRS; i++) {
    const order = i % 2 === 0 ? MODES : ([...MODES].reverse() as Mode[]);
    for (const mode of order) {
      const r = await once(mode, size.env);
      runs[mode].push(r);
      console.log(JSON.stringify({ setting: size.label, pair: i + 1, delivery: mode, ...r }));
    }
  }
  const ratio = (k: keyof Run) => summary(runs["exactly-once"].map((r, i) => +(r[k] / runs["at-least-once"][i]![k]).toFixed(3)));
  const line = {
    setting: size.label,
    records: N,
    pairs: PAIRS,
    "exactly-once": { records_per_s: summary(runs["exactly-once"].map((r) => r.records_per_s)), sustained_records_per_s: summary(runs["exactly-once"].map((r) => r.sustained_records_per_s)), worker_us_per_record: summary(runs["exactly-once"].map((r) => r.worker_us_per_record)), clickhouse_us_per_row: summary(runs["exactly-once"].map((r) => r.clickhouse_us_per_row)), kafka_us_per_record: summary(runs["exactly-once"].map((r) => r.kafka_us_per_record)) },
    "at-least-once": { records_per_s: summary(runs["at-least-once"].map((r) => r.records_per_s)), sustained_records_per_s: summary(runs["at-least-once"].map((r) => r.sustained_records_per_s)), worker_us_per_record: summary(runs["at-least-once"].map((r) => r.worker_us_per_record)), clickhouse_us_per_row: summary(runs["at-least-once"].map((r) => r.clickhouse_us_per_row)), kafka_us_per_record: summary(runs["at-least-once"].map((r) => r.kafka_us_per_record)) },
    exactly_once_over_at_least_once: { records_per_s: ratio("records_per_s"), sustained_records_per_s: ratio("sustained_records_per_s"), worker_us_per_record: ratio("worker_us_per_record"), clickhouse_us_per_row: ratio("clickhouse_us_per_row"), kafka_us_per_record: ratio("kafka_us_per_record") },
  };
  report.push(line);
  console.log(JSON.stringify(line));
}
process.exit(0);
