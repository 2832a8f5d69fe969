// A topic whose last offset holds a transaction's marker (any transactional writer leaves one, and
// aborted records read as nothing under read_committed): the DLQ read (dlq tools and the replay
// check) and the audit's read of the raw topic end at the partition's end as the fetcher reports
// it, instead of waiting for a record at end − 1 that never comes (30 s, then an error; or a
// quiet spell taken for the end).
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { recordOffsets } from "../../src/audit/sources.ts";
import { readDlq } from "../../src/dlq/reader.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { createTopic, deleteTopics, props } from "../support/kafka.ts";
import { KAFKA_BROKERS, ROOT, run, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const topics: string[] = [];
afterAll(() => deleteTopics(...topics).catch(() => {}));

/** Three plain records at offsets 0–2. */
async function threeRecords(): Promise<string> {
  const topic = await createTopic("txn-tail");
  topics.push(topic);
  const p = new Producer(props);
  try {
    for (let i = 0; i < 3; i++) await p.produce(topic, `record ${i}`, { partition: 0 });
  } finally {
    p.close();
  }
  return topic;
}

/** Two records in a committed transaction: the next two offsets, then its marker. */
async function transaction(topic: string): Promise<void> {
  // Kafka's own producer tool, transactional: librdkafka's binding here has no transactions.
  await run([
    "java", "-cp", `${ROOT}/.local/kafka/libs/*`, "org.apache.kafka.tools.ProducerPerformance",
    "--topic", topic, "--num-records", "2", "--record-size", "16", "--throughput", "-1",
    "--transactional-id", uniqueName("txn"), "--transaction-duration-ms", "60000",
    "--producer-props", `bootstrap.servers=${KAFKA_BROKERS}`,
  ]);
}

async function topicWithMarkerAtTail(): Promise<string> {
  const topic = await threeRecords();
  await transaction(topic);
  return topic;
}

const reader = (extra: Record<string, string> = {}) =>
  new Consumer({ props: { ...props, "group.id": uniqueName("end"), "enable.partition.eof": "true", ...extra }, topics: [], readHeaders: true });

test("the DLQ read ends at the partition's end when its last offset is a transaction's marker", async () => {
  const topic = await topicWithMarkerAtTail();
  const c = reader();
  try {
    expect(c.queryWatermarks(topic, 0)).toEqual({ low: 0, high: 6 });
    const seen: number[] = [];
    const t0 = performance.now();
    const next = await readDlq(c, topic, 1, {}, (e) => void seen.push(e.offset), (m) => void seen.push(m.offset));
    expect(performance.now() - t0).toBeLessThan(20_000);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(next.get(0)).toBe(5);
  } finally {
    await c.close();
  }
});

test("the audit's read of a range is not ended by a quiet spell: it waits for the partition's end at or past the range", async () => {
  const topic = await threeRecords();
  const c = reader({ "isolation.level": "read_committed" });
  try {
    const offsets: number[] = [];
    const reading = (async () => {
      for await (const o of recordOffsets(c, topic, { partition: 0, from: 0, to: 6 })) offsets.push(o);
    })();
    // The producer is quiet for longer than any idle timeout a reader might take for the end.
    await Bun.sleep(3000);
    expect(offsets).toEqual([0, 1, 2]);
    await transaction(topic);
    await reading;
    expect(offsets).toEqual([0, 1, 2, 3, 4]);
  } finally {
    await c.close();
  }
});
