// scripts/librdkafka/patches/fetch-budget.patch, on librdkafka's mock cluster: what one fetch puts
// on the prefetch queue stops at queued.max.messages.kbytes, counted as the records cost (key,
// value, headers, the op each is held in, a decompressed batch's buffer), and the rest of the batch
// is fetched again from the next offset. Unpatched, the bound counted values alone and was checked
// only before a fetch: a batch of 200,000 records of two bytes each, or a batch that fails to
// decompress and stands for as many offsets, went onto the queue whole.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import { setLogSink } from "../../src/log.ts";
import { mockClusterWith } from "../support/mock-cluster.ts";
import { produceRaw, recordBatch, type RawRecord } from "../support/raw-batch.ts";
import { waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const RECORDS = 200_000;
const tiny: RawRecord = { value: new TextEncoder().encode("{}") };

test.each([
  ["uncompressed", "none", false],
  ["lz4", "lz4", false],
  ["lz4 that does not decompress", "lz4", true],
] as const)("a batch of 200,000 two-byte records (%s): the prefetch queue stays near its bound, and every offset comes out once, in order", async (_n, codec, corrupt) => {
  const topic = `budget-${codec}-${corrupt}`;
  const { holder, bootstraps } = mockClusterWith(topic);
  let consumer: Consumer | null = null;
  try {
    const batch = recordBatch(Array.from({ length: RECORDS }, () => tiny), codec, { corruptFrame: corrupt });
    expect((await produceRaw(bootstraps, topic, 0, batch)).error).toBe(0);
    expect((await produceRaw(bootstraps, topic, 0, recordBatch([{ value: new TextEncoder().encode('{"last":1}') }]))).error).toBe(0);

    // 1 MiB of queue: each queued record costs its op (a few hundred bytes), so a few thousand fit.
    consumer = new Consumer({
      props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g`, "queued.max.messages.kbytes": "1024", "fetch.queue.backoff.ms": "10" },
      topics: [],
    });
    consumer.assign([{ topic, partition: 0, offset: 0n }]);
    // The fetcher stops once the queue is full: the queue's length then holds still.
    let last = -1, still = 0;
    const settled = await waitFor(async () => {
      await consumer!.waitForMessages(100);
      const now = consumer!.prefetched;
      still = now > 0 && now === last ? still + 1 : 0;
      last = now;
      return still >= 10 ? now : undefined;
    }, 30_000, "the prefetch queue to stop growing");
    console.log(`${codec}${corrupt ? " (corrupt)" : ""}: ${settled} of ${RECORDS} offsets prefetched under a 1 MiB queue`);
    expect(settled).toBeLessThan(30_000);

    const offsets: number[] = [];
    let errors = 0;
    // What the log says of the unreadable batch: one line for it, not one an offset.
    const said: string[] = [];
    setLogSink((line) => void (line.includes("could not decode") && said.push(line)));
    const deadline = performance.now() + 40_000;
    while (performance.now() < deadline && offsets.length < RECORDS + 1) {
      await consumer.waitForMessages(100);
      for (const m of consumer.poll()) {
        if (m.topic !== topic) continue;
        offsets.push(m.offset);
        if (m.error) errors++;
      }
    }
    expect(offsets.length).toBe(RECORDS + 1);
    expect(offsets.every((o, i) => o === i)).toBe(true);
    expect(errors).toBe(corrupt ? RECORDS : 0);
    // Reported in fetches of a few thousand offsets, each naming the same batch: one line.
    expect(said.length).toBe(corrupt ? 1 : 0);
    if (corrupt) expect(JSON.parse(said[0]!).text).toMatch(/record batch at offsets 0-199999/);
  } finally {
    setLogSink();
    await consumer?.close();
    holder.close();
  }
}, 90_000);
