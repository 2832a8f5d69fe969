// scripts/librdkafka/patches/unreadable-batches.patch, on librdkafka's own mock cluster, which keeps
// whatever bytes a ProduceRequest carries (the real broker refuses most of these; what it keeps is
// test/e2e/raw-records.test.ts). Every offset of a partition comes out of the consumer once, as a
// record or as a record error naming its batch, and the consumer moves past; unpatched, a record
// that does not parse read as a truncated response and its offset was fetched for ever.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { mockClusterWith } from "../support/mock-cluster.ts";
import { produceRaw, recordBatch, type RawRecord } from "../support/raw-batch.ts";

setDefaultTimeout(60_000);

const value = (i: number): RawRecord => ({ value: new TextEncoder().encode(`{"n":${i}}`) });

test("every offset of batches that cannot be read comes out once, as a record error naming its batch, and the partition moves on", async () => {
  const topic = "unreadable";
  const { holder, bootstraps } = mockClusterWith(topic);
  let consumer: Consumer | null = null;
  try {
    const batches: Array<Parameters<typeof recordBatch>> = [
      // 0-2: the third record claims 50 bytes where the batch holds 3.
      [[value(0), value(1), { raw: Uint8Array.of(0, 0, 4), recordLength: 50 }]],
      [[value(3)]],
      // 4: a key length of -2, which Kafka's reader takes as null: a record.
      [[{ ...value(4), keyLength: -2 }], "lz4"],
      // 5-6, compressed: the second record's first varint runs past its bytes.
      [[value(5), { raw: new Uint8Array(10).fill(0xff) }], "lz4"],
      // 7-8: an lz4 frame that does not decompress.
      [[value(7), value(8)], "lz4", { corruptFrame: true }],
      [[value(9)]],
    ];
    for (const args of batches) expect((await produceRaw(bootstraps, topic, 0, recordBatch(...args))).error).toBe(0);

    consumer = new Consumer({ props: { "bootstrap.servers": bootstraps, "group.id": "unreadable-g" }, topics: [] });
    consumer.assign([{ topic, partition: 0, offset: 0n }]);
    const got: Message[] = [];
    const deadline = performance.now() + 20_000;
    while (performance.now() < deadline && (got.at(-1)?.offset ?? -1) < 9) {
      await consumer.waitForMessages(200);
      got.push(...consumer.poll().filter((m) => m.topic === topic));
    }
    const seen = got.map((m) => [m.offset, m.error ? m.error.split(":")[0] : new TextDecoder().decode(m.value!)]);
    expect(seen).toEqual([
      [0, '{"n":0}'],
      [1, '{"n":1}'],
      [2, "_BAD_MSG"],
      [3, '{"n":3}'],
      [4, '{"n":4}'],
      [5, '{"n":5}'],
      [6, "_BAD_MSG"],
      [7, "_BAD_COMPRESSION"],
      [8, "_BAD_COMPRESSION"],
      [9, '{"n":9}'],
    ]);
    expect(got[4]!.key).toBeNull();
    // Each error names the batch it stands in, so that the DLQ envelope says what was wrong.
    expect(got[2]!.errorText).toMatch(/batch at offsets 0-2 .*could not be read/);
    expect(got[6]!.errorText).toMatch(/batch at offsets 5-6 .*could not be read/);
    expect(got[7]!.errorText).toMatch(/Decompression \(codec 0x3\) of the record batch at offsets 7-8/);
  } finally {
    await consumer?.close();
    holder.close();
  }
});
