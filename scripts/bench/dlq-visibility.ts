/**
 * How long a dead-lettered record takes to be visible to a DLQ reader, and what the worker spends
 * a record, with the DLQ in transactions (exactly-once) or not (at-least-once): a paced stream of
 * synthetic records, 3 % invalid, each invalid one carrying its send time; a read_committed reader
 * of the DLQ (as every DLQ reader must be) notes when each envelope arrives. Visibility = arrival
 * minus send time, p50 / p99 / max. CPU per record is the worker's (all threads) over the stream.
 * Each run is at the default batch size, then at BATCH_SIZE 10000.
 * Usage: bun scripts/bench/dlq-visibility.ts [seconds=20] [rate=2000] [binary=bun src/main.ts]   (services running)
 * A second binary (e.g. an older release built beside) is measured in the same run with BENCH_BASELINE=<cmd>.
 */
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { prepareRun, processCpuSeconds } from "../lib/harness.ts";

const seconds = Number(process.argv[2] ?? 20);
const rate = Number(process.argv[3] ?? 2000);
const binary = process.argv[4];
const baseline = process.env.BENCH_BASELINE;

interface Result {
  binary: string;
  delivery: string;
  batch_size: string;
  records: number;
  envelopes: number;
  visibility_ms: { p50: number; p99: number; max: number };
  worker_cpu_us_per_record: number;
}

const pct = (xs: number[], q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? NaN;

async function measure(bin: string | undefined, delivery: string, batchSize: string | null): Promise<Result> {
  const run = await prepareRun("dlqvis", "bench");
  const extra: Record<string, string> = { DELIVERY: delivery, ...(batchSize ? { BATCH_SIZE: batchSize } : {}) };
  const worker = await run.startWorker({ ...(bin ? { binary: bin } : {}), extra });
  const reader = new Consumer({
    props: { "bootstrap.servers": run.brokers, "group.id": `dlqvis-${Date.now()}`, "isolation.level": "read_committed" },
    topics: [run.dlq],
  });
  const seen: number[] = [];
  let reading = true;
  const read = (async () => {
    while (reading) {
      const batch = reader.poll();
      const now = Date.now();
      for (const m of batch) {
        const sent = /sent_at_ms\\?":(\d+)/.exec(new TextDecoder().decode(m.value!))?.[1];
        if (sent) seen.push(now - Number(sent));
      }
      if (batch.length === 0) await reader.waitForMessages(5);
    }
  })();
  const gen = new SyntheticCdrs({ seed: 7, invalidShare: 0, idPrefix: `v${Date.now()}` });
  const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "5" });
  const cpu0 = processCpuSeconds(worker.pid);
  let records = 0, invalid = 0;
  const t0 = Date.now();
  // 100 sends a second, rate/100 records each: every 33rd record invalid, stamped with its send time.
  while (Date.now() - t0 < seconds * 1000) {
    const tick = Date.now();
    const values: string[] = [];
    for (let i = 0; i < rate / 100; i++, records++)
      if (records % 33 === 0) {
        values.push(`{"sent_at_ms":${Date.now()}, "broken": `);
        invalid++;
      } else values.push(gen.next().text);
    await producer.produceBatch(run.raw, values);
    await Bun.sleep(Math.max(0, 10 - (Date.now() - tick)));
  }
  producer.close();
  const deadline = Date.now() + 30_000;
  while (seen.length < invalid && Date.now() < deadline) await Bun.sleep(50);
  const cpu = processCpuSeconds(worker.pid) - cpu0;
  reading = false;
  await read;
  await reader.close();
  worker.kill("SIGTERM");
  await worker.exited;
  await run.cleanup();
  seen.sort((a, b) => a - b);
  return {
    binary: bin ?? "bun src/main.ts",
    delivery,
    batch_size: batchSize ?? "default",
    records,
    envelopes: seen.length,
    visibility_ms: { p50: pct(seen, 0.5), p99: pct(seen, 0.99), max: seen.at(-1) ?? NaN },
    worker_cpu_us_per_record: Math.round((cpu / records) * 1e6 * 10) / 10,
  };
}

for (const batch of [null, "10000"])
  for (const [bin, delivery] of [
    [binary, "exactly-once"],
    [binary, "at-least-once"],
    ...(baseline ? [[baseline, "exactly-once"]] : []),
  ] as const)
    console.log(JSON.stringify(await measure(bin, delivery, batch)));
