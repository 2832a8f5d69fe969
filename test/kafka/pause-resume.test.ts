// A partition paused and resumed mid-stream on librdkafka's mock cluster, as the worker's gate does
// (delivery/gate.ts: ClickHouse away, the breaker, a replay check): librdkafka drops what it had
// queued at the pause and fetches again from the position handed out. Every offset comes out once,
// however the pause falls against the fetch budget, record errors of an unreadable batch too: they
// move that position as records do (scripts/librdkafka/patches/unreadable-batches.patch).
import { expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { setLogSink } from "../../src/log.ts";
import { mockClusterWith } from "../support/mock-cluster.ts";
import { produceRaw, recordBatch, type RawRecord } from "../support/raw-batch.ts";

setDefaultTimeout(60_000);

const tiny: RawRecord = { value: new TextEncoder().encode("{}") };

/** Reads `topic`'s partition 0 until `last` comes out, pausing and resuming after every `every` messages. */
async function readPausing(consumer: Consumer, topic: string, last: number, every: number): Promise<{ got: Message[]; pauses: number }> {
  const tp = [{ topic, partition: 0 }];
  const got: Message[] = [];
  let pauses = 0;
  let sincePause = 0;
  const deadline = performance.now() + 50_000;
  while (performance.now() < deadline && (got.at(-1)?.offset ?? -1) < last) {
    await consumer.waitForMessages(50);
    const batch = consumer.poll(500).filter((m) => m.topic === topic);
    got.push(...batch);
    sincePause += batch.length;
    if (sincePause < every) continue;
    sincePause = 0;
    // Paused between polls with records still queued, as the gate pauses: resumed a moment later.
    consumer.pause(tp);
    pauses++;
    await Bun.sleep(20);
    expect(consumer.poll(500).filter((x) => x.topic === topic)).toEqual([]);
    consumer.resume(tp);
  }
  return { got, pauses };
}

test("paused at the fetch budget's edge, again and again: every offset of a 50,000-record batch comes out once, in order", async () => {
  const topic = "pause-budget";
  const { holder, bootstraps } = mockClusterWith(topic);
  let consumer: Consumer | null = null;
  try {
    const N = 50_000;
    expect((await produceRaw(bootstraps, topic, 0, recordBatch(Array.from({ length: N }, () => tiny), "lz4"))).error).toBe(0);
    // A 256 KiB queue: a fetch stops a few hundred records into the batch, and the pauses fall inside it.
    consumer = new Consumer({
      props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g`, "queued.max.messages.kbytes": "256", "fetch.queue.backoff.ms": "10" },
      topics: [],
    });
    consumer.assign([{ topic, partition: 0, offset: 0n }]);
    const { got, pauses } = await readPausing(consumer, topic, N - 1, 1_999);
    expect(pauses).toBeGreaterThan(20);
    expect(got.length).toBe(N);
    expect(got.every((m, i) => m.offset === i && !m.error)).toBe(true);
  } finally {
    await consumer?.close();
    holder.close();
  }
}, 90_000);

test("an unreadable batch paused and resumed every 701 offsets: each record error comes out once, and the partition moves on", async () => {
  const topic = "pause-unreadable";
  const { holder, bootstraps } = mockClusterWith(topic);
  let consumer: Consumer | null = null;
  setLogSink(() => {}); // the batch's one line a report: said in unreadable-batches.test.ts
  try {
    const N = 3_000;
    expect((await produceRaw(bootstraps, topic, 0, recordBatch(Array.from({ length: N }, () => tiny), "lz4", { corruptFrame: true }))).error).toBe(0);
    expect((await produceRaw(bootstraps, topic, 0, recordBatch([{ value: new TextEncoder().encode('{"last":1}') }]))).error).toBe(0);
    consumer = new Consumer({
      props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g`, "queued.max.messages.kbytes": "256", "fetch.queue.backoff.ms": "10" },
      topics: [],
    });
    consumer.assign([{ topic, partition: 0, offset: 0n }]);
    const { got, pauses } = await readPausing(consumer, topic, N, 701);
    expect(pauses).toBeGreaterThanOrEqual(3);
    // Unpatched, each resume fetched again from the batch's first offset: 701 errors out, a pause,
    // the same 701 again, for ever (the last record never came).
    expect(got.at(-1)?.offset).toBe(N);
    expect(got.length).toBe(N + 1);
    expect(got.every((m, i) => m.offset === i && (i < N ? m.error !== undefined : !m.error))).toBe(true);
  } finally {
    setLogSink();
    await consumer?.close();
    holder.close();
  }
}, 90_000);
