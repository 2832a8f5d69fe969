// The worker's stage order without services: a consumer, a ClickHouse writer and a DLQ that only
// record what they are asked (a unit test of worker.ts and the delivery stage behind it; test/e2e/ runs the same against Kafka and
// ClickHouse). What is checked is the order: nothing is committed before it is durable.
import { expect, setDefaultTimeout, test } from "bun:test";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import type { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import type { DlqPublisher } from "../../src/dlq/publisher.ts";
import type { GroupConsumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { Counters } from "../../src/stats/counters.ts";
import { Delivery } from "../../src/delivery/delivery.ts";
import { Worker } from "../../src/worker/worker.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { rowBinaryToTsv } from "../support/row-binary.ts";
import { waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const msg = (offset: number, value: string): Message => ({
  topic: "cdr.raw", partition: 0, offset, timestamp: Date.now(), value: enc.encode(value), key: null,
});

function harness(messages: Message[], dlqDelayMs = 0) {
  const events: string[] = [];
  const rejections: Array<{ reason: string; field: string | null; detail: string; offset: number }> = [];
  let queued = [...messages];
  let assigned = false;
  // Paused partitions hand out nothing, as librdkafka's: the drain polls with every partition paused.
  let paused = false;
  const consumer = {
    pendingRevoke: null,
    revokeLost: false,
    assignment: [{ topic: "cdr.raw", partition: 0 }],
    pause: () => void (paused = true),
    resume: () => void (paused = false),
    takeAssigned: () => (assigned ? [] : ((assigned = true), [[{ topic: "cdr.raw", partition: 0 }]])),
    poll: (max: number) => (paused ? [] : queued.splice(0, max)),
    waitForMessages: (ms: number) => Bun.sleep(ms),
    wake: () => {},
    commit: async (offsets: Array<{ partition: number; offset: bigint }>) => { events.push(`commit ${offsets.map((o) => o.offset).join(",")}`); },
    completeRevoke: () => {},
    close: () => events.push("close"),
  } as unknown as GroupConsumer;
  const writer = {
    insert: async (body: Uint8Array) => {
      const ids = rowBinaryToTsv(body).map((l) => l.split("\t")[1]);
      events.push(`insert ${ids.join(",")}`);
    },
    endpoints: [],
    ping: async () => true,
  } as unknown as ClickHouseWriter;
  const dlq = {
    storageFailureReason: "normalization_error",
    encodeRejection: (r: { reason: string; field: string | null; detail: string }, source: { offset: number }) => ({ r, source, bytes: 1 }),
    publish: async ({ r, source }: { r: { reason: string; field: string | null; detail: string }; source: { offset: number } }) => {
      await Bun.sleep(dlqDelayMs);
      events.push(`dlq ${r.reason}`);
      rejections.push({ reason: r.reason, field: r.field, detail: r.detail, offset: source.offset });
    },
  } as unknown as DlqPublisher;
  const counters = new Counters();
  const delivery = new Delivery(
    { topic: "cdr.raw", batchSize: 2, flushIntervalMs: 20, concurrency: 1, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1 }, dlqMaxRatio: 1, dlqRatioWindow: 100 },
    { consumer, writer, dlq, counters },
  );
  const worker = new Worker({ consumer, decoding: { phone: new PhoneNormalizer() }, delivery });
  return { worker, delivery, events, rejections, counters, push: (m: Message[]) => { queued = queued.concat(m); } };
}

const valid = (i: number) => toJson(withFields({ raw_id: `r${i}` }));

test("Valid record precedes an invalid record: the invalid record's offset is committed only after the valid rows are flushed", async () => {
  const h = harness([msg(0, valid(0)), msg(1, valid(1)), msg(2, "{broken"), msg(3, valid(3))]);
  const running = h.worker.run();
  await waitFor(() => (h.events.includes("commit 4") ? true : undefined), 5000, "everything committed");
  h.worker.stop();
  await running;
  const at = (e: string) => h.events.indexOf(e);
  expect(at("insert r0,r1")).toBeGreaterThanOrEqual(0);
  // No commit reaches past offset 1 before r0,r1 are inserted, nor past 2 before the DLQ acknowledged.
  for (const [i, e] of h.events.entries()) {
    const m = /^commit (\d+)$/.exec(e);
    if (!m) continue;
    const offset = Number(m[1]);
    if (offset >= 1) expect(i).toBeGreaterThan(at("insert r0,r1"));
    if (offset >= 3) expect(i).toBeGreaterThan(at("dlq malformed_json"));
    if (offset >= 4) expect(i).toBeGreaterThan(at("insert r3"));
  }
  expect(h.events.at(-1)).toBe("close");
  expect([h.counters.durableClickhouse, h.counters.durableDlq]).toEqual([3, 1]);
});

test("an invalid record with nothing uncommitted before it is committed as soon as the DLQ acknowledges it, not after a flush", async () => {
  const h = harness([msg(0, "{broken")]);
  const running = h.worker.run();
  await waitFor(() => (h.events.includes("commit 1") ? true : undefined), 5000, "the DLQ record committed");
  expect(h.events.filter((e) => e.startsWith("insert"))).toEqual([]);
  h.worker.stop();
  await running;
});

test("SIGTERM received during operation: stop() flushes the buffered rows, commits them, then closes", async () => {
  const h = harness([msg(0, valid(0))]);
  const running = h.worker.run();
  await waitFor(() => (h.delivery.bufferedRows === 1 || h.events.length > 0 ? true : undefined), 5000, "a row buffered");
  h.worker.stop();
  await running;
  expect(h.events).toEqual(["insert r0", "commit 1", "close"]);
  expect(h.worker.state).toBe("stopped");
});

test("a record librdkafka could not decode (_BAD_MSG) is dead-lettered as malformed_json with its error, and its offset committed", async () => {
  // A real broker does not hand out such records on demand: the consumer's Message is injected.
  const bad: Message = { topic: "cdr.raw", partition: 0, offset: 1, timestamp: -1, value: null, key: null, error: "_BAD_MSG: Local: Bad message format" };
  const h = harness([msg(0, valid(0)), bad, msg(2, valid(2))]);
  const running = h.worker.run();
  await waitFor(() => (h.events.includes("commit 3") ? true : undefined), 5000, "everything committed");
  h.worker.stop();
  await running;
  expect(h.rejections).toEqual([{ reason: "malformed_json", field: null, detail: "librdkafka could not decode the record: _BAD_MSG: Local: Bad message format", offset: 1 }]);
  expect([h.counters.durableClickhouse, h.counters.durableDlq]).toEqual([2, 1]);
});
