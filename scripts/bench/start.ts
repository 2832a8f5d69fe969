/**
 * A worker's start as an operator meets it: ms from its launch until its stats show the first 1,000
 * records of a fresh topic processed (all invalid, so no insert is in the count), under
 * DELIVERY=exactly-once and at-least-once, alternated. Under exactly-once that includes the replay
 * check and the wait for the first heartbeat proven. Stats are read every 50 ms: the figure is
 * ±50 ms. The median and the range of each mode.
 * Usage: bun scripts/bench/start.ts [rounds=5] [binary=bun src/main.ts]   (services running)
 */
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun } from "../lib/harness.ts";

const ROUNDS = Number(process.argv[2] ?? 5);
const binary = process.argv[3];
const RECORDS = 1_000;
const MODES = ["exactly-once", "at-least-once"] as const;

async function startMs(mode: (typeof MODES)[number]): Promise<number> {
  const run = await prepareRun("start", "bench");
  try {
    const p = new Producer({ "bootstrap.servers": run.brokers });
    await p.produceBatch(run.raw, Array.from({ length: RECORDS }, (_, i) => `{"not_a_cdr":${i}}`));
    p.close();
    const t0 = performance.now();
    const worker = await run.startWorker({ ...(binary ? { binary } : {}), extra: { DELIVERY: mode } });
    try {
      while ((await run.stats()).total_processed < RECORDS) await Bun.sleep(50);
      return Math.round(performance.now() - t0);
    } finally {
      worker.kill("SIGTERM");
      await worker.exited;
    }
  } finally {
    await run.cleanup();
  }
}

const ms: Record<(typeof MODES)[number], number[]> = { "exactly-once": [], "at-least-once": [] };
for (let i = 0; i < ROUNDS; i++)
  for (const mode of i % 2 ? [...MODES].reverse() : MODES) {
    const t = await startMs(mode);
    ms[mode].push(t);
    console.log(JSON.stringify({ round: i + 1, delivery: mode, ms_to_first_records: t }));
  }
const summary = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], min: s[0], max: s.at(-1) };
};
console.log(JSON.stringify({ rounds: ROUNDS, records: RECORDS, "exactly-once": summary(ms["exactly-once"]), "at-least-once": summary(ms["at-least-once"]) }));
process.exit(0);
