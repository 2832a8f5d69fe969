// Offsets librdkafka passes over on purpose, said in their place (the project's
// scripts/librdkafka/patches/passed-over-reports.patch), read from the real broker: a transaction's
// control records and an aborted transaction's records. With them, every offset of a partition comes
// out once, as a record or as passed over, so that what is missing is a skip (delivery/offsets/gaps.ts).
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { Transactions } from "../../src/kafka/transaction.ts";
import { createTopic, deleteTopics, props, watermarks } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

/** 20 transactions of 50 records on partition 0, every third aborted; the ranges each took. */
async function transactions(topic: string): Promise<{ committed: number; aborted: number; markers: number }> {
  const producer = new Producer({ ...props, "transactional.id": uniqueName("passed-txn"), "transaction.timeout.ms": "10000" });
  const txn = new Transactions(producer);
  let committed = 0;
  let aborted = 0;
  try {
    await txn.init(30_000);
    for (let t = 0; t < 20; t++) {
      txn.begin();
      await Promise.all(Array.from({ length: 50 }, (_, i) => txn.produce(topic, `{"t":${t},"i":${i}}`, { partition: 0 })));
      if (t % 3 === 2) {
        await txn.abort(30_000);
        aborted += 50;
      } else {
        await txn.commit(30_000);
        committed += 50;
      }
    }
  } finally {
    txn.close();
  }
  return { committed, aborted, markers: 20 };
}

/** Partition 0 read from offset 0 to its end under read_committed; paused and resumed every `every` messages when given. */
async function readToEnd(topic: string, extra: { passedOver: boolean; queueKb?: number; every?: number }): Promise<Message[]> {
  const c = new Consumer({
    props: {
      ...props,
      "group.id": uniqueName("passed-reader"),
      "isolation.level": "read_committed",
      "enable.partition.eof": "true",
      ...(extra.queueKb ? { "queued.max.messages.kbytes": String(extra.queueKb), "fetch.queue.backoff.ms": "10" } : {}),
    },
    topics: [],
    passedOver: extra.passedOver,
  });
  const tp = [{ topic, partition: 0 }];
  c.assign([{ ...tp[0]!, offset: 0n }]);
  const out: Message[] = [];
  const deadline = Date.now() + 40_000;
  let since = 0;
  try {
    while (c.endReached(0) === undefined || c.endReached(0)! < watermarks(topic).high) {
      if (Date.now() > deadline) throw new Error(`no end of ${topic} in 40 s`);
      const batch = c.poll(100);
      out.push(...batch);
      since += batch.length;
      if (extra.every && since >= extra.every) {
        since = 0;
        // Paused between polls with messages still queued, as the worker's gate pauses.
        c.pause(tp);
        await Bun.sleep(10);
        c.resume(tp);
      }
      if (batch.length === 0) await c.waitForMessages(50);
    }
  } finally {
    await c.close();
  }
  return out;
}

test("every offset of a partition with committed and aborted transactions comes out once: a record, or passed over with the reason said", async () => {
  const topic = await createTopic("passed-over", 1);
  cleanup.push(topic);
  const { committed, aborted, markers } = await transactions(topic);
  const high = watermarks(topic).high;
  expect(high).toBe(committed + aborted + markers);

  const got = await readToEnd(topic, { passedOver: true });
  expect(got.map((m) => m.offset)).toEqual(Array.from({ length: high }, (_, i) => i));
  expect(got.filter((m) => !m.passedOver).length).toBe(committed);
  expect(got.filter((m) => m.passedOver).length).toBe(aborted + markers);
  expect(got.every((m) => (m.passedOver ? m.value === null : m.value !== null && !m.error))).toBe(true);

  // A reader that does not ask sees the records alone, as before (audit, the DLQ readers).
  const plain = await readToEnd(topic, { passedOver: false });
  expect(plain.length).toBe(committed);
  expect(plain.some((m) => m.passedOver)).toBe(false);
});

test("with a prefetch queue of 1 KiB, paused and resumed every 7 messages: still every offset once, in order", async () => {
  const topic = await createTopic("passed-over-small", 1);
  cleanup.push(topic);
  const { committed, aborted, markers } = await transactions(topic);
  const high = committed + aborted + markers;
  const got = await readToEnd(topic, { passedOver: true, queueKb: 1, every: 7 });
  expect(got.map((m) => m.offset)).toEqual(Array.from({ length: high }, (_, i) => i));
  expect(got.filter((m) => m.passedOver).length).toBe(aborted + markers);
});
