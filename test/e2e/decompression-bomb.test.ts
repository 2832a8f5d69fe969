// Decompression bombs through the real broker: records of 200 MB that lz4 packs under the broker's
// 1 MiB, one on each partition between valid records. The worker stays up within its exported
// memory bound, dead-letters each bomb with an error header that names its batch, and stores every valid
// record once: librdkafka (patched, scripts/librdkafka/patches/) stops decompressing at
// receive.message.max.bytes and reports the batch offset by offset instead of fetching it again.
import { expect, setDefaultTimeout, test } from "bun:test";
import { loadConfig } from "../../src/config.ts";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { samplePeakRss } from "../support/rss.ts";
import { consumeN, header, props, text } from "../support/kafka.ts";
import { Admin } from "../../src/kafka/admin.ts";
import { Transactions } from "../../src/kafka/transaction.ts";
import { waitFor } from "../support/services.ts";
import { explainedBy, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts } = e2eScope();
const BOMB_BYTES = 200_000_000;
const VALID_EACH_SIDE = 100;

async function produce(topic: string, values: Array<[number, string]>, extra: Record<string, string> = {}) {
  const p = new Producer({ ...props, "compression.type": "lz4", "linger.ms": "20", ...extra });
  try {
    await Promise.all(values.map(([partition, v]) => p.produce(topic, v, { partition })));
  } finally {
    p.close();
  }
}

test("a 200 MB lz4 record on each partition between valid ones: each dead-lettered as malformed_json naming its batch, every valid record stored once, RSS within the bound", async () => {
  const n = await names("bomb");
  const valid = (side: string) =>
    Array.from({ length: 3 * VALID_EACH_SIDE }, (_, i) => [i % 3, toJson(withFields({ raw_id: `bomb-${side}-${i}` }))] as [number, string]);
  await produce(n.raw, valid("before"));
  // Valid JSON, a valid record's fields and 200 MB of spaces: the broker sees under 1 MiB.
  const record = toJson(withFields({ raw_id: "the-bomb" }));
  const bomb = `${record.slice(0, -1)}${" ".repeat(BOMB_BYTES)}}`;
  for (const partition of [0, 1, 2]) await produce(n.raw, [[partition, bomb]], { "message.max.bytes": "300000000" });
  await produce(n.raw, valid("after"));

  const w = await startWorker(workerEnv(n));
  const bound = memoryBoundBytes(loadConfig({ DLQ_PROVENANCE: "unsigned" }).batch, 50_000);
  const rss = samplePeakRss(w.proc.pid);
  let peak = 0;
  try {
    await explainedBy(w, async () => {
      const s = await statsWhen(w, (s) => s.total_processed === 6 * VALID_EACH_SIDE + 3 && s.in_flight_buffer === 0, 60_000, "every record durable");
      expect([s.total_clickhouse, s.total_dlq]).toEqual([6 * VALID_EACH_SIDE, 3]);
      const c = await storedCounts(n);
      expect(c).toEqual({ rows: 6 * VALID_EACH_SIDE, ids: 6 * VALID_EACH_SIDE, offsetRows: 6 * VALID_EACH_SIDE, offsets: 6 * VALID_EACH_SIDE });
      for (const m of await consumeN(n.dlq, 3, 30_000)) {
        const e = JSON.parse(text(m));
        // No byte of the record could be had; its error header says what was wrong with the batch.
        expect([e.failure_reason, e.failed_field, e.original_payload]).toEqual(["malformed_json", null, ""]);
        expect(header(m, HEADERS.detail)).toMatch(/Decompression \(codec 0x3\) of the record batch at offsets (\d+)-\1 \(\d+ compressed bytes\) failed/);
      }
      expect(w.proc.exitCode).toBeNull();
    });
  } finally {
    peak = rss.stop();
    expect(await w.stop()).toBe(0);
  }
  console.log(`3 lz4 bombs of ${BOMB_BYTES / 1e6} MB: peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, bound ${(bound / 2 ** 20).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);

// A topic another tool made often keeps each producer's codec (compression.type=producer): the
// broker stores gzip and snappy batches as they come, and every codec must stop at the same cap.
// snappy packs spaces about 21:1, so 18 MB is the most it fits under the broker's 1 MiB.
test.each([
  ["gzip", 200_000_000],
  ["snappy", 18_000_000],
])("%s bombs of %d bytes on a topic whose compression.type is producer: dead-lettered, RSS within the bound, and run says the codec", async (codec, bytes) => {
  const n = await names(`bomb-${codec}`);
  const admin = new Admin(props);
  try {
    await admin.alterConfigs(n.raw, { "compression.type": "producer", "retention.ms": "86400000" });
    await waitFor(async () => ((await admin.describeConfigs(n.raw))["compression.type"]?.value === "producer" ? true : undefined), 30_000, "compression.type=producer");
  } finally {
    admin.close();
  }
  const valid = (side: string) =>
    Array.from({ length: 3 * 20 }, (_, i) => [i % 3, toJson(withFields({ raw_id: `${codec}-${side}-${i}` }))] as [number, string]);
  const extra = { "compression.type": codec, "message.max.bytes": "300000000" };
  await produce(n.raw, valid("before"), extra);
  const record = toJson(withFields({ raw_id: "the-bomb" }));
  const bomb = `${record.slice(0, -1)}${" ".repeat(bytes)}}`;
  for (const partition of [0, 1]) await produce(n.raw, [[partition, bomb]], extra);
  await produce(n.raw, valid("after"), extra);

  const w = await startWorker(workerEnv(n));
  const bound = memoryBoundBytes(loadConfig({ DLQ_PROVENANCE: "unsigned" }).batch, 50_000);
  const rss = samplePeakRss(w.proc.pid);
  let peak = 0;
  try {
    await explainedBy(w, async () => {
      const s = await statsWhen(w, (s) => s.total_processed === 122 && s.in_flight_buffer === 0, 60_000, "every record durable");
      expect([s.total_clickhouse, s.total_dlq]).toEqual([120, 2]);
      expect(await storedCounts(n)).toEqual({ rows: 120, ids: 120, offsetRows: 120, offsets: 120 });
      for (const m of await consumeN(n.dlq, 2, 30_000)) {
        expect(JSON.parse(text(m)).failure_reason).toBe("malformed_json");
        expect(header(m, HEADERS.detail)).toMatch(/^librdkafka could not read the record \(_BAD_COMPRESSION[^)]*\): Decompression \(codec 0x[12]\) of the record batch/);
      }
    });
    const line = w.logs.find((l) => l.includes("compression.type is not lz4"));
    expect(JSON.parse(line!)).toMatchObject({ level: "warn", topic: n.raw, compression_type: "producer" });
  } finally {
    peak = rss.stop();
    expect(await w.stop()).toBe(0);
  }
  console.log(`2 ${codec} bombs of ${bytes / 1e6} MB: peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, bound ${(bound / 2 ** 20).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);

// A bomb in a transaction that was aborted was never a record: librdkafka passes aborted batches
// over (read_committed), and a batch that cannot be read is no exception. The same bomb committed
// is dead-lettered, which shows the aborted one was read past rather than never fetched.
test("an lz4 bomb in an aborted transaction is passed over, never dead-lettered; committed, it is", async () => {
  const n = await names("bomb-txn");
  const record = toJson(withFields({ raw_id: "the-bomb" }));
  const bomb = `${record.slice(0, -1)}${" ".repeat(BOMB_BYTES)}}`;
  const producer = new Producer({ ...props, "transactional.id": `${n.group}-txn`, "compression.type": "lz4", "message.max.bytes": "300000000" });
  const txn = new Transactions(producer);
  try {
    await txn.init(30_000);
    txn.begin();
    await txn.produce(n.raw, bomb, { partition: 0 });
    await txn.abort(30_000);
    txn.begin();
    await txn.produce(n.raw, bomb, { partition: 1 });
    await txn.commit(30_000);
  } finally {
    txn.close();
  }
  await produce(n.raw, Array.from({ length: 30 }, (_, i) => [i % 3, toJson(withFields({ raw_id: `txn-${i}` }))] as [number, string]));
  const w = await startWorker(workerEnv(n));
  try {
    await explainedBy(w, async () => {
      const s = await statsWhen(w, (s) => s.total_processed === 31 && s.in_flight_buffer === 0, 60_000, "every record settled");
      expect([s.total_clickhouse, s.total_dlq]).toEqual([30, 1]);
      const [m] = await consumeN(n.dlq, 1, 30_000);
      expect(header(m!, HEADERS.sourcePartition)).toBe("1");
    });
  } finally {
    expect(await w.stop()).toBe(0);
  }
}, 180_000);
