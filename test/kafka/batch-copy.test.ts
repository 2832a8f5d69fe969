// The batch copy compiled by TinyCC (src/kafka/batch-copy.ts) against the per-message reference path:
// same topic, two groups, every field of every message identical.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { loadBatchCopy } from "../../src/kafka/batch-copy.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { Consumer, type ConsumerOptions } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { consumeN, createTopic, deleteTopics, props } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

test("the native batch copy is available here (else the consumer silently runs the slow path)", () => {
  expect(loadBatchCopy()).not.toBeNull();
});

test("native batch copy and per-message copy hand out identical messages: values, keys, headers, tombstones, empty values, offsets, timestamps", async () => {
  const topic = await createTopic("batch-copy", 3);
  cleanup.push(topic);
  const p = new Producer(props);
  const sent: Promise<unknown>[] = [];
  const enc = new TextEncoder();
  for (let i = 0; i < 3000; i++) {
    const kind = i % 7;
    // Sizes from empty to 64 KiB, binary bytes, and null values/keys, spread over 3 partitions.
    const value = kind === 0 ? null : kind === 1 ? new Uint8Array(0) : kind === 2 ? new Uint8Array(65_536).fill(i & 0xff) : enc.encode(`{"i":${i},"pad":"${"é".repeat(i % 50)}"}`);
    // Headers: none, the DLQ's eight-like set, names beyond ASCII, a name twice, empty and binary values.
    const headers: Array<[string, string | Uint8Array]> =
      i % 3 === 0 ? [] : i % 3 === 1
        ? Array.from({ length: 8 }, (_, h) => [`dlq.h${h}`, `${i}-${h}`] as [string, string])
        : [["zürich-東京", "v"], ["dup", new Uint8Array(0)], ["dup", new Uint8Array(300).fill(i & 0xff)], [`n${i % 5}`, "x"]];
    sent.push(p.produce(topic, value, { headers, ...(kind === 3 ? {} : { key: kind === 4 ? new Uint8Array(0) : `k${i}` }) }));
    if (sent.length >= 500) await Promise.all(sent.splice(0));
  }
  await Promise.all(sent);
  p.close();
  const native = await consumeN(topic, 3000, 30_000, true, true);
  const reference = await consumeN(topic, 3000, 30_000, true, false);
  const order = (ms: typeof native) => [...ms].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  const plain = (ms: typeof native) =>
    order(ms).map((m) => ({ ...m, value: m.value && [...m.value], key: m.key && [...m.key], headers: m.headers?.map(([k, v]) => [k, [...v]]) }));
  expect(native.length).toBe(3000);
  expect(plain(native)).toEqual(plain(reference));
  // The comparison is not vacuous: both paths saw tombstones, keyless messages and big payloads.
  expect(native.filter((m) => m.value === null).length).toBeGreaterThan(400);
  expect(native.filter((m) => m.key === null).length).toBeGreaterThan(400);
  expect(native.filter((m) => m.value?.length === 65_536).length).toBeGreaterThan(400);
  expect(native.filter((m) => m.headers?.length === 0).length).toBe(1000);
  expect(native.filter((m) => m.headers?.length === 8).length).toBe(1000);
  expect(native.find((m) => m.headers?.length === 4)!.headers![0]![0]).toBe("zürich-東京");
  // Without headers asked, none are handed out.
  expect((await consumeN(topic, 3000, 30_000, false, true)).every((m) => m.headers === undefined)).toBe(true);
});

/** Every message of a topic through a consumer with these copy options. */
async function readAll(topic: string, count: number, opts: Partial<ConsumerOptions>): Promise<Message[]> {
  const c = new Consumer({ props: { ...props, "group.id": uniqueName("caps") }, topics: [topic], ...opts });
  const out: Message[] = [];
  try {
    const deadline = Date.now() + 30_000;
    while (out.length < count && Date.now() < deadline) {
      await c.waitForMessages(100);
      out.push(...c.poll());
    }
  } finally {
    await c.close();
  }
  return out.sort((a, b) => a.offset - b.offset);
}

test("with a value cap and no keys, both paths copy each value's first bytes only, say its whole size, and hand out no key", async () => {
  const topic = await createTopic("batch-copy-caps", 1);
  cleanup.push(topic);
  const p = new Producer(props);
  const sizes = [1, 10, 99, 100, 101, 5_000];
  for (const [i, n] of sizes.entries()) await p.produce(topic, new Uint8Array(n).fill(65 + i), { key: "k".repeat(n), partition: 0 });
  await p.produce(topic, null, { key: "tombstone", partition: 0 });
  p.close();
  for (const nativeCopy of [true, false]) {
    const got = await readAll(topic, sizes.length + 1, { valueMaxBytes: 100, readKeys: false, nativeCopy });
    expect(got.map((m) => m.value?.length ?? null)).toEqual([1, 10, 99, 100, 100, 100, null]);
    expect(got.map((m) => m.valueBytes)).toEqual([undefined, undefined, undefined, undefined, 101, 5_000, undefined]);
    expect(got.every((m) => m.key === null)).toBe(true);
    expect(got[5]!.value!.every((b) => b === 65 + 5)).toBe(true);
  }
});

test("with the slab reused, each poll's messages read whole before the next poll, which copies into the same memory", async () => {
  const topic = await createTopic("batch-copy-reuse", 1);
  cleanup.push(topic);
  const p = new Producer(props);
  const enc = new TextEncoder();
  const sent: Promise<unknown>[] = [];
  // Sizes that grow past the first slab's, so it is replaced by a larger one too.
  const text = (i: number) => `${i}:${"x".repeat(i < 1000 ? i % 97 : 20_000)}`;
  for (let i = 0; i < 2000; i++) sent.push(p.produce(topic, enc.encode(text(i)), { partition: 0, headers: [["h", `${i}`]] }));
  await Promise.all(sent);
  p.close();
  const c = new Consumer({ props: { ...props, "group.id": uniqueName("reuse") }, topics: [topic], readHeaders: true, maxBatch: 64, reuseSlab: true });
  const read: string[] = [];
  const buffers = new Set<ArrayBufferLike>();
  let polls = 0;
  try {
    const deadline = Date.now() + 30_000;
    while (read.length < 2000 && Date.now() < deadline) {
      await c.waitForMessages(100);
      const batch = c.poll();
      if (batch.length > 0) polls++;
      // As the filler takes them: each message made into something of its own at once.
      for (const m of batch) read.push(`${new TextDecoder().decode(m.value!)}|${new TextDecoder().decode(m.headers![0]![1])}`);
      for (const m of batch) buffers.add(m.value!.buffer);
    }
  } finally {
    await c.close();
  }
  expect(read).toEqual(Array.from({ length: 2000 }, (_, i) => `${text(i)}|${i}`));
  // The memory is reused: a slab for each size it grew to, not one a poll.
  expect(polls).toBeGreaterThan(20);
  expect(buffers.size).toBeLessThanOrEqual(5);
});
