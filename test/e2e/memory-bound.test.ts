// The exported memory bound (cdr_worker_memory_bound_bytes) holds for whatever a fetch can bring:
// many large records one per batch on every partition at once, large keys, and a batch of the
// smallest records, each costing librdkafka an op. Peak RSS (VmHWM) is compared with the bound at
// the defaults. The bombs (one record decompressing to 200 MB) are test/e2e/decompression-bomb.test.ts.
import { expect, setDefaultTimeout, test } from "bun:test";
import { loadConfig } from "../../src/config.ts";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { samplePeakRss } from "../support/rss.ts";
import { consumeN, header, props, text } from "../support/kafka.ts";
import { produceRaw, recordBatch } from "../support/raw-batch.ts";
import { KAFKA_BROKERS } from "../support/services.ts";
import { explainedBy, startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts } = e2eScope();
const MiB = 1024 * 1024;
const bound = memoryBoundBytes(loadConfig({ DLQ_PROVENANCE: "unsigned" }).batch, 50_000);

/** Runs `w` until `done`, sampling its peak RSS; returns it. */
async function peakWhile(w: RunningWorker, done: () => Promise<unknown>): Promise<number> {
  const rss = samplePeakRss(w.proc.pid);
  try {
    await explainedBy(w, done);
  } finally {
    rss.stop();
  }
  return rss.stop();
}

async function produceEach(topic: string, values: Array<{ partition: number; value: string | null; key?: string }>) {
  // One record a batch: linger 0 and one message a batch, so no batch holds two.
  const p = new Producer({ ...props, "compression.type": "lz4", "linger.ms": "0", "batch.num.messages": "1", "message.max.bytes": "100000000" });
  try {
    for (const v of values) await p.produce(topic, v.value, { partition: v.partition, key: v.key });
  } finally {
    p.close();
  }
}

test("15 records of 15 MiB on each partition, one a batch, all at once: each dead-lettered over RECORD_MAX_BYTES, RSS within the bound", async () => {
  const n = await names("mem-large");
  const record = toJson(withFields({ raw_id: "large" }));
  const large = `${record.slice(0, -1)}${" ".repeat(15 * MiB)}}`;
  await produceEach(n.raw, Array.from({ length: 45 }, (_, i) => ({ partition: i % 3, value: large })));
  await produceEach(n.raw, Array.from({ length: 30 }, (_, i) => ({ partition: i % 3, value: toJson(withFields({ raw_id: `after-${i}` })) })));
  const w = await startWorker(workerEnv(n));
  const peak = await peakWhile(w, async () => {
    const s = await statsWhen(w, (s) => s.total_processed === 75 && s.in_flight_buffer === 0, 90_000, "every record settled");
    expect([s.total_clickhouse, s.total_dlq]).toEqual([30, 45]);
    expect((await storedCounts(n)).rows).toBe(30);
    const [m] = await consumeN(n.dlq, 1, 30_000);
    expect(JSON.parse(text(m!)).failure_reason).toBe("normalization_error");
    expect(header(m!, HEADERS.truncated)).toBe("true");
    expect(header(m!, HEADERS.detail)).toBe(`the record's ${Buffer.byteLength(large)} bytes are over RECORD_MAX_BYTES (1048576)`);
  });
  expect(await w.stop()).toBe(0);
  console.log(`45 records of 15 MiB: peak RSS ${(peak / MiB).toFixed(0)} MiB, bound ${(bound / MiB).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);

test("15 MiB keys with null values on each partition: dead-lettered, RSS within the bound", async () => {
  const n = await names("mem-keys");
  const key = "k".repeat(15 * MiB);
  await produceEach(n.raw, Array.from({ length: 30 }, (_, i) => ({ partition: i % 3, value: null, key })));
  const w = await startWorker(workerEnv(n));
  const peak = await peakWhile(w, async () => {
    const s = await statsWhen(w, (s) => s.total_processed === 30 && s.in_flight_buffer === 0, 90_000, "every record settled");
    expect([s.total_clickhouse, s.total_dlq]).toEqual([0, 30]);
  });
  expect(await w.stop()).toBe(0);
  console.log(`30 keys of 15 MiB: peak RSS ${(peak / MiB).toFixed(0)} MiB, bound ${(bound / MiB).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);

test("a 1 MiB lz4 batch of 90,000 {} records: each dead-lettered once, RSS within the bound", async () => {
  const n = await names("mem-tiny");
  const tiny = { value: new TextEncoder().encode("{}") };
  const records = Array.from({ length: 90_000 }, () => tiny);
  const batch = recordBatch(records, "lz4");
  expect(batch.length).toBeGreaterThan(0.9 * MiB);
  expect((await produceRaw(KAFKA_BROKERS, n.raw, 0, batch)).error).toBe(0);
  const w = await startWorker(workerEnv(n));
  const peak = await peakWhile(w, async () => {
    const s = await statsWhen(w, (s) => s.total_processed === records.length && s.in_flight_buffer === 0, 120_000, "every record settled");
    expect(s.total_dlq).toBe(records.length);
  });
  expect(await w.stop()).toBe(0);
  console.log(`90,000 {} records in one batch: peak RSS ${(peak / MiB).toFixed(0)} MiB, bound ${(bound / MiB).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);
