// Offsets librdkafka moves past without a record or a word: skips, on librdkafka's mock cluster, read
// by the real consumer into the real delivery stage (a ClickHouse and a DLQ that record what they are
// asked). Each is counted and read again from the gap with the commit held there; what comes back is
// stored once, never dropped as a record handed out twice; what stays missing after the last read
// gets an envelope an offset, so the partition moves on (delivery/offsets/gaps.ts).
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import type { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { Delivery } from "../../src/delivery/delivery.ts";
import { READS } from "../../src/delivery/offsets/gaps.ts";
import type { DlqPublisher } from "../../src/dlq/publisher.ts";
import { Consumer, type GroupConsumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import type { TopicPartition } from "../../src/kafka/partition-list.ts";
import { setLogSink } from "../../src/log.ts";
import { Counters } from "../../src/stats/counters.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { mockClusterWith } from "../support/mock-cluster.ts";
import { produceRaw, recordBatch, type RawRecord } from "../support/raw-batch.ts";
import { rowBinaryToTsv } from "../support/row-binary.ts";

setDefaultTimeout(60_000);

const ctx = { phone: new PhoneNormalizer() };
const record = (id: number, offsetDelta?: number): RawRecord => ({
  value: new TextEncoder().encode(toJson(withFields({ raw_id: `r${id}` }))),
  offsetDelta,
});

let lines: Array<Record<string, unknown>> = [];
afterEach(() => setLogSink());

/** The real consumer on `topic`'s partition 0 from offset 0, into a delivery that records what it sends. */
function worker(topic: string, bootstraps: string, moveSeek: (offset: number) => number = (o) => o) {
  lines = [];
  setLogSink((l) => { lines.push(JSON.parse(l)); if (process.env.SKIPS_DEBUG) console.log(l); });
  const real = new Consumer({
    props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g`, "fetch.queue.backoff.ms": "10" },
    topics: [],
    passedOver: true,
  });
  real.assign([{ topic, partition: 0, offset: 0n }]);
  const stored: string[] = [];
  const dead: Array<{ offset: number; detail: string }> = [];
  const commits: number[] = [];
  const seeks: number[] = [];
  const events: string[] = [];
  // The group's side stands in: the partition is this member's, its commits recorded.
  const consumer = {
    assignment: [{ topic, partition: 0 }],
    pause: (ps: TopicPartition[]) => real.pause(ps),
    resume: (ps: TopicPartition[]) => real.resume(ps),
    seek: (ps: TopicPartition[]) => {
      seeks.push(Number(ps[0]!.offset));
      real.seek([{ ...ps[0]!, offset: BigInt(moveSeek(Number(ps[0]!.offset))) }]);
    },
    commit: async (offsets: TopicPartition[]) => {
      commits.push(Number(offsets[0]!.offset));
      events.push(`commit ${offsets[0]!.offset}`);
      return offsets;
    },
    onStanding: () => {},
  } as unknown as GroupConsumer;
  const writer = {
    insert: async (body: Uint8Array) => {
      const ids = rowBinaryToTsv(body).map((l) => l.split("\t")[1]!);
      stored.push(...ids);
      events.push(...ids.map((id) => `stored ${id}`));
    },
  } as unknown as ClickHouseWriter;
  const dlq = {
    encodeRejection: (r: { detail: string }, at: { offset: number }) => ({ bytes: 1, offset: at.offset, detail: r.detail }),
    publish: async (e: { offset: number; detail: string }) => {
      dead.push({ offset: e.offset, detail: e.detail });
      events.push(`dlq ${e.offset}`);
    },
  } as unknown as DlqPublisher;
  const counters = new Counters();
  const d = new Delivery(
    { topic, batchSize: 5, flushIntervalMs: 50, concurrency: 1, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1 }, dlqMaxRatio: 1, dlqRatioWindow: 100 },
    { consumer, writer, dlq, counters, offsets: { logStarts: async (ps) => new Map(ps.map((p) => [p, 0])), skipsTold: true } },
  );
  d.listen({ onFatal: (e) => { throw e; }, onSettled: () => {} });
  /** The worker's loop: poll, hand over, flush what is due, until the commit reaches `end`. */
  const runTo = async (end: number, afterPoll: (got: Message[]) => void = () => {}) => {
    const deadline = Date.now() + 45_000;
    while (commits.at(-1) !== end) {
      if (Date.now() > deadline) throw new Error(`commit at ${commits.at(-1)}, not ${end}; stored ${stored.length}`);
      d.flushIfDue();
      if (d.full) {
        await real.waitForMessages(20);
        continue;
      }
      const got = real.poll(Math.min(5, d.pollMax()));
      d.received(got);
      for (const m of got) {
        if (m.passedOver) d.passedOver(m);
        else d.handOver(m, decode(m.value, ctx), 1_764_000_000);
      }
      afterPoll(got);
      d.flushIfDue();
      if (got.length === 0) d.idle();
      if (got.length === 0) await real.waitForMessages(20);
    }
    await d.settle();
  };
  return { real, d, counters, stored, dead, commits, seeks, events, runTo };
}

test("offsets librdkafka moves past on every read: read again, the commit held, then each gets an envelope and the partition moves on", async () => {
  const topic = "skip-always";
  const { holder, bootstraps } = mockClusterWith(topic);
  // librdkafka made to move past 4 offsets on every read: once it has handed out the first poll's
  // records past 12, and at each read again from there (a seek forward, as a skip would).
  let from = -1;
  const w = worker(topic, bootstraps, (o) => (o === from ? from + 4 : o));
  try {
    expect((await produceRaw(bootstraps, topic, 0, recordBatch(Array.from({ length: 30 }, (_, i) => record(i))))).error).toBe(0);
    await w.runTo(30, (got) => {
      const last = got.at(-1)?.offset ?? -1;
      if (from >= 0 || last < 12) return;
      from = last + 1;
      w.real.seek([{ topic, partition: 0, offset: BigInt(from + 4) }]);
    });
    const hole = [from, from + 1, from + 2, from + 3];
    expect(from).toBeGreaterThan(12);
    // Every record stored once, whatever was handed out again after each read again.
    const expected = Array.from({ length: 30 }, (_, i) => i).filter((o) => !hole.includes(o));
    expect([...w.stored].sort()).toEqual(expected.map((o) => `r${o}`).sort());
    expect(w.dead.map((e) => e.offset)).toEqual(hole);
    expect(w.dead.every((e) => e.detail.includes(`without a record or a word, on ${READS} reads`))).toBe(true);
    expect(w.seeks).toEqual(Array.from({ length: READS }, () => from));
    // Counted once, as found; said once with its range.
    expect([w.counters.offsetsSkipped, w.counters.partition(0).skipped]).toEqual([4, 4]);
    expect(lines.filter((l) => String(l.msg).startsWith("offsets were skipped")).map((l) => [l.from, l.to, l.offsets])).toEqual([[from, from + 4, 4]]);
    // The commit never passed the gap before its envelopes were acknowledged.
    const firstPast = w.events.findIndex((e) => e.startsWith("commit ") && Number(e.slice(7)) > from);
    expect(firstPast).toBeGreaterThan(w.events.indexOf(`dlq ${from + 3}`));
  } finally {
    await w.real.close();
    holder.close();
  }
});

test("regression: a skip then the rewind that reads it again: the records come back and are stored, not dropped as handed out twice", async () => {
  const topic = "skip-rewind";
  const { holder, bootstraps } = mockClusterWith(topic);
  const w = worker(topic, bootstraps);
  try {
    expect((await produceRaw(bootstraps, topic, 0, recordBatch(Array.from({ length: 30 }, (_, i) => record(i))))).error).toBe(0);
    // librdkafka made to move past 5-11 once (a seek forward, as a skip would): the worker's own read again brings them back.
    let skipped = false;
    await w.runTo(30, (got) => {
      if (skipped || !got.some((m) => m.offset === 4)) return;
      skipped = true;
      w.real.seek([{ topic, partition: 0, offset: 12n }]);
    });
    expect(skipped).toBe(true);
    expect([...w.stored].sort()).toEqual(Array.from({ length: 30 }, (_, i) => `r${i}`).sort());
    expect(w.dead).toEqual([]);
    expect(w.seeks).toEqual([5]);
    expect(w.counters.offsetsSkipped).toBe(7);
    // 12 and after come again by the worker's own seek back to 5: said so, not counted as librdkafka's repeats.
    expect(w.counters.recordsRepeated).toBe(0);
    expect(lines.filter((l) => String(l.msg).startsWith("librdkafka handed out"))).toEqual([]);
    const again = lines.filter((l) => String(l.msg).startsWith("records read again after the seek back"));
    expect(again.length).toBeGreaterThan(0);
    expect(again.every((l) => Number(l.from) >= 12 && Number(l.to) <= 30)).toBe(true);
    // The commit did not pass 5 before the records read again were stored.
    const firstPast = w.events.findIndex((e) => e.startsWith("commit ") && Number(e.slice(7)) > 5);
    expect(firstPast).toBeGreaterThan(Math.max(...[5, 6, 7, 8, 9, 10, 11].map((o) => w.events.indexOf(`stored r${o}`))));
    expect(lines.some((l) => String(l.msg).startsWith("the skipped offsets came back"))).toBe(true);
  } finally {
    await w.real.close();
    holder.close();
  }
});
