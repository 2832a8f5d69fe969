// A commit's metadata string travels with the committed offset and comes back from committed()
// (the replay check reads what the last owner wrote there); offsetsForTimes finds a topic's
// first record at or after a time (where the check starts reading the DLQ); Admin asks the same
// questions without blocking.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { consumeN, createTopic, deleteTopics, props } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const topics: string[] = [];
afterAll(async () => {
  if (topics.length) await deleteTopics(...topics);
});

test("metadata committed with an offset is read back with it, UTF-8 and all; a commit without any reads back none", async () => {
  const topic = await createTopic("meta", 2);
  topics.push(topic);
  const group = uniqueName("meta-group");
  const c = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
  try {
    const metadata = JSON.stringify({ since: 1_764_000_000_123, note: "ünïcode ✓" });
    await c.commit([
      { topic, partition: 0, offset: 5n, metadata },
      { topic, partition: 1, offset: 7n },
    ]);
    const back = c.committed([{ topic, partition: 0 }, { topic, partition: 1 }]);
    expect(back.map((r) => [r.partition, r.offset, r.metadata])).toEqual([
      [0, 5n, metadata],
      [1, 7n, undefined],
    ]);
  } finally {
    await c.close();
  }
});

test("offsetsForTimes: the first offset whose timestamp is at or after the time; -1 past the last record", async () => {
  const topic = await createTopic("times", 1);
  topics.push(topic);
  const p = new Producer(props);
  for (let i = 0; i < 6; i++) await p.produce(topic, `r${i}`, { partition: 0 });
  p.close();
  const msgs = await consumeN(topic, 6);
  const c = new Consumer({ props: { ...props, "group.id": uniqueName("times") }, topics: [] });
  try {
    for (const m of msgs) {
      const first = msgs.findIndex((x) => x.timestamp >= m.timestamp);
      expect(c.offsetsForTimes(topic, [0], m.timestamp).get(0)).toBe(first);
    }
    expect(c.offsetsForTimes(topic, [0], 0).get(0)).toBe(0);
    expect(c.offsetsForTimes(topic, [0], msgs[5]!.timestamp + 1).get(0)).toBe(-1);
  } finally {
    await c.close();
  }
});

// The replay check asks these through Admin, without blocking the event loop: the answers must be
// the ones the consumer's blocking calls give.
test("Admin's asynchronous lookups answer as the consumer's blocking calls: committed with metadata, earliest, latest, by time, partition count", async () => {
  const topic = await createTopic("lookups", 2);
  topics.push(topic);
  const p = new Producer(props);
  for (let i = 0; i < 6; i++) await p.produce(topic, `r${i}`, { partition: i % 2 });
  p.close();
  const msgs = await consumeN(topic, 6);
  const group = uniqueName("lookups-group");
  const c = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
  const admin = new Admin(props);
  try {
    const metadata = JSON.stringify({ since: 1_764_000_000_123 });
    await c.commit([{ topic, partition: 0, offset: 2n, metadata }]);
    const tps = [{ topic, partition: 0 }, { topic, partition: 1 }];
    const asked = await admin.committed(group, tps);
    expect(asked.map((r) => [r.partition, r.offset, r.metadata, r.err])).toEqual([
      [0, 2n, metadata, 0],
      [1, -1001n, undefined, 0],
    ]);
    expect(asked.map((r) => [r.partition, r.offset, r.metadata])).toEqual(
      c.committed(tps).map((r) => [r.partition, r.offset, r.metadata]),
    );
    expect([...(await admin.listOffsets(topic, [0, 1], "earliest"))]).toEqual([[0, 0], [1, 0]]);
    expect([...(await admin.listOffsets(topic, [0, 1], "latest"))]).toEqual([[0, 3], [1, 3]]);
    for (const m of msgs) {
      expect((await admin.listOffsets(topic, [m.partition], m.timestamp)).get(m.partition)).toBe(
        c.offsetsForTimes(topic, [m.partition], m.timestamp).get(m.partition)!,
      );
    }
    const last = Math.max(...msgs.map((m) => m.timestamp));
    expect((await admin.listOffsets(topic, [0], last + 1)).get(0)).toBe(-1);
    expect(await admin.partitionCount(topic)).toBe(2);
    expect(await admin.partitionCount(uniqueName("absent"))).toBeNull();
  } finally {
    admin.close();
    await c.close();
  }
});
