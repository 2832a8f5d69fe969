// Records no client library writes, which the real broker keeps: an lz4 batch whose record has a
// key or a value length below -1. Kafka's own reader takes such a length as null, so the broker
// accepts the batch byte for byte; librdkafka read it as a length past the batch and fetched the
// same offset for ever, with no warning and no envelope (a restart could not help). Now each is
// read as Kafka reads it: a null key leaves a valid record to be stored, a null value goes to the
// DLQ, and every partition is committed to its end. Batches the broker refuses and librdkafka
// cannot read are test/kafka/unreadable-batches.test.ts, on the mock cluster.
import { expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, header, props, readCommitted } from "../support/kafka.ts";
import { produceRaw, recordBatch } from "../support/raw-batch.ts";
import { KAFKA_BROKERS, waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts, ch } = e2eScope();

async function produceValid(topic: string, prefix: string, count: number): Promise<void> {
  const p = new Producer({ ...props, "compression.type": "lz4" });
  try {
    for (let i = 0; i < count; i++) await p.produce(topic, toJson(withFields({ raw_id: `${prefix}-${i}` })), { partition: i % 3 });
  } finally {
    p.close();
  }
}

test("an lz4 batch with a key length of -2, and one with a value length of -2, between valid records: read as null, nothing stalls", async () => {
  const n = await names("raw-lengths");
  await produceValid(n.raw, "before", 30);
  const value = new TextEncoder().encode(toJson(withFields({ raw_id: "null-key" })));
  const keyed = await produceRaw(KAFKA_BROKERS, n.raw, 0, recordBatch([{ value, keyLength: -2 }], "lz4"));
  const valueless = await produceRaw(KAFKA_BROKERS, n.raw, 1, recordBatch([{ value: null, valueLength: -2 }], "lz4"));
  // The broker keeps both: its reader takes each length as null.
  expect([keyed.error, valueless.error]).toEqual([0, 0]);
  expect([keyed.baseOffset, valueless.baseOffset]).toEqual([10n, 10n]);
  await produceValid(n.raw, "after", 30);

  const w = await startWorker(workerEnv(n));
  try {
    const s = await statsWhen(w, (s) => s.total_processed === 62 && s.in_flight_buffer === 0, 60_000, "every record settled");
    expect([s.total_clickhouse, s.total_dlq]).toEqual([61, 1]);
    expect(await storedCounts(n)).toEqual({ rows: 61, ids: 61, offsetRows: 61, offsets: 61 });
    const stored = await (await ch.query({ query: `SELECT kafka_partition, kafka_offset FROM ${n.database}.${n.table} WHERE raw_id = 'null-key'`, format: "JSONEachRow" })).json();
    expect(stored).toEqual([{ kafka_partition: 0, kafka_offset: "10" }]);
    const [envelope] = await readCommitted(n.dlq);
    expect([header(envelope!, HEADERS.sourcePartition), header(envelope!, HEADERS.sourceOffset)]).toEqual(["1", "10"]);
    expect(JSON.parse(new TextDecoder().decode(envelope!.value!)).failure_reason).toBe("malformed_json");
    await waitFor(() => ([...committedOffsets(n.group, n.raw, 3).values()].join() === "21,21,20" ? true : undefined), 30_000, "every partition committed to its end");
  } finally {
    expect(await w.stop()).toBe(0);
  }
}, 120_000);
