// The delivery stage without services: a consumer, a ClickHouse writer and a DLQ that only record
// what they are asked. What is checked: a record the last owner delivered is sent nowhere and
// committed; the breaker and the replay check pause through one gate; settle commits what is durable.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import type { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { Delivery, type DeliveryDeps } from "../../src/delivery/delivery.ts";
import { TransactionalCommits, type TransactionalProducer } from "../../src/delivery/offsets/transactional-commits.ts";
import type { ReplayFinder } from "../../src/delivery/replays.ts";
import { DlqPublisher } from "../../src/dlq/publisher.ts";
import type { Consumer } from "../../src/kafka/consumer.ts";
import type { Standing } from "../../src/kafka/heartbeat-proof.ts";
import { kafkaError } from "../../src/kafka/handle.ts";
import type { Message } from "../../src/kafka/message.ts";
import type { TopicPartition } from "../../src/kafka/partition-list.ts";
import { setLogSink } from "../../src/log.ts";
import { Counters } from "../../src/stats/counters.ts";
import type { CdrWorkerError } from "../../src/errors.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { rowBinaryToTsv } from "../support/row-binary.ts";
import { ClickHouseInsertError } from "../../src/clickhouse/insert-error.ts";
import { waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const ctx = { phone: new PhoneNormalizer() };
const msg = (offset: number, value: string): Message => ({ topic: "cdr.raw", partition: 0, offset, timestamp: Date.now(), value: enc.encode(value), key: null });
const valid = (i: number) => toJson(withFields({ raw_id: `r${i}` }));

function harness(opts: {
  dlqMaxRatio?: number;
  delivered?: number[];
  commitRefusals?: unknown[];
  dlq?: DlqPublisher;
  /** Exactly-once's commits; envelopes then wait for their partition's earlier rows. */
  transactions?: DeliveryDeps["transactions"];
  /** Awaited by each insert before it is recorded. */
  insertGate?: Promise<void>;
  /** The replay check's finder, in place of one that finds `delivered`. */
  finder?: ReplayFinder;
  /** What the consumer's statistics show of the membership (one heartbeat accepted at the start if absent). */
  standing?: Standing;
  /** While it says so, ClickHouse refuses every row as data (a column it cannot read). */
  refusing?: () => boolean;
  dlqRatioWindow?: number;
  /** Gaps told apart, with a library that says what it passes over: each log start 0. */
  skipsTold?: boolean;
} = {}) {
  const events: string[] = [];
  const paused = new Set<number>();
  let standingSeen: ((s: Standing) => void) | undefined;
  const refusals = [...(opts.commitRefusals ?? [])];
  const consumer = {
    assignment: [{ topic: "cdr.raw", partition: 0 }],
    pause: (ps: { partition: number }[]) => ps.forEach((p) => (paused.add(p.partition), events.push(`pause ${p.partition}`))),
    resume: (ps: { partition: number }[]) => ps.forEach((p) => (paused.delete(p.partition), events.push(`resume ${p.partition}`))),
    commit: async (offsets: Array<{ offset: bigint }>) => {
      const refusal = refusals.shift();
      if (refusal) {
        events.push(`refused ${offsets.map((o) => o.offset).join(",")}`);
        throw refusal;
      }
      events.push(`commit ${offsets.map((o) => o.offset).join(",")}`);
    },
    seek: (ps: Array<{ partition: number; offset: bigint }>) => ps.forEach((p) => events.push(`seek ${p.partition} ${p.offset}`)),
    // Exactly-once's membership lease: one heartbeat accepted at the start holds it for the test.
    onStanding: (fn: (s: Standing) => void) => (standingSeen = fn),
  } as unknown as Consumer;
  const writer = {
    insert: async (body: Uint8Array) => {
      await opts.insertGate;
      if (opts.refusing?.()) throw new ClickHouseInsertError("Cannot parse input", "data", { code: 27, row: null });
      events.push(`insert ${rowBinaryToTsv(body).map((l) => l.split("\t")[1]).join(",")}`);
    },
  } as unknown as ClickHouseWriter;
  const dlq = opts.dlq ?? ({
    encodeRejection: () => ({ bytes: 1 }),
    publish: async () => void events.push("dlq"),
    publishRefused: async () => void events.push("dlq"),
    publishStorageFailure: async (records: unknown[]) => void records.forEach(() => events.push("dlq")),
  } as unknown as DlqPublisher);
  const counters = new Counters();
  const replays = opts.finder ?? (opts.delivered ? { findDelivered: async () => new Map([[0, { offsets: new Set(opts.delivered), since: 0 }]]) } : undefined);
  const d = new Delivery(
    { topic: "cdr.raw", batchSize: 100, flushIntervalMs: 60_000, concurrency: 1, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1 }, dlqMaxRatio: opts.dlqMaxRatio ?? 1, dlqRatioWindow: opts.dlqRatioWindow ?? 10 },
    {
      consumer, writer, dlq, counters, ...(replays ? { replays } : {}), ...(opts.transactions ? { transactions: opts.transactions } : {}),
      ...(opts.skipsTold ? { offsets: { logStarts: async (ps: readonly number[]) => new Map(ps.map((p) => [p, 0])), skipsTold: true } } : {}),
    },
  );
  const fatal: unknown[] = [];
  d.listen({ onFatal: (e) => fatal.push(e), onSettled: () => {} });
  standingSeen?.(opts.standing ?? { kind: "accepted", sentAfter: performance.now(), rebalanceSince: null });
  const hand = (ms: Message[]) => {
    d.received(ms);
    for (const m of ms) d.handOver(m, decode(m.value, ctx), 1_764_000_000);
  };
  return { d, events, paused, counters, fatal, hand };
}

test("records the last owner delivered are sent nowhere and committed with the rest; the partition waits for its check", async () => {
  const h = harness({ delivered: [0, 1] });
  h.d.assigned([{ topic: "cdr.raw", partition: 0 }]);
  expect(h.paused.has(0)).toBe(true);
  await waitFor(() => (h.d.replayChecksPending === 0 ? true : undefined), 5000, "replay check done");
  expect(h.paused.has(0)).toBe(false);
  h.hand([msg(0, valid(0)), msg(1, "{broken"), msg(2, valid(2))]);
  await h.d.settle();
  const sent = h.events.filter((e) => e.startsWith("insert") || e === "dlq");
  expect(sent).toEqual(["insert r2"]); // 0 and 1 (its rejection too) went nowhere
  expect(h.events.filter((e) => e.startsWith("commit")).at(-1)).toBe("commit 3");
  expect([h.counters.replaysSkipped, h.counters.consumed, h.counters.durableClickhouse]).toEqual([2, 1, 1]);
});

// librdkafka once handed out 430 records of a partition a second time after a pause and resume
// (CI, ClickHouse gone for 20 s under CH_UNREACHABLE_POLICY=wait): each was inserted again.
test("regression: records handed out again under the same assignment are dropped, not stored twice; counted, one line a run", async () => {
  const h = harness({});
  const lines: Array<Record<string, unknown>> = [];
  setLogSink((l) => lines.push(JSON.parse(l)));
  try {
    h.hand([msg(0, valid(0)), msg(1, valid(1)), msg(2, "{broken")]);
    h.hand([msg(1, valid(1)), msg(2, "{broken"), msg(3, valid(3))]);
    await h.d.settle();
  } finally {
    setLogSink();
  }
  expect(h.events.filter((e) => e.startsWith("insert") || e === "dlq")).toEqual(["dlq", "insert r0,r1,r3"]);
  expect(h.events.filter((e) => e.startsWith("commit")).at(-1)).toBe("commit 4");
  expect([h.counters.consumed, h.counters.durableClickhouse, h.counters.durableDlq]).toEqual([4, 3, 1]);
  expect([h.counters.recordsRepeated, h.counters.partition(0).repeated]).toEqual([2, 2]);
  const said = lines.filter((l) => String(l.msg).startsWith("librdkafka handed out records already consumed"));
  expect(said.map((l) => [l.partition, l.from, l.to, l.records])).toEqual([[0, 1, 3, 2]]);
  // A new assignment starts the partition afresh: its records count again.
  h.d.assigned([{ topic: "cdr.raw", partition: 0 }]);
  h.hand([msg(3, valid(3))]);
  expect(h.counters.consumed).toBe(5);
});

// A skip (offsets librdkafka moved past without a record or a word) is read again from the gap: the
// records that come back lie below the highest offset consumed, and were once taken for records
// handed out twice and dropped.
test("regression: a skip, then the read again from it: the records that come back are stored, not dropped; the commit waits for them", async () => {
  const h = harness({ skipsTold: true });
  const lines: Array<Record<string, unknown>> = [];
  setLogSink((l) => lines.push(JSON.parse(l)));
  try {
    h.hand([0, 1, 2, 3, 4, 12, 13, 14].map((o) => msg(o, valid(o))));
    await waitFor(() => (h.events.includes("seek 0 5") ? true : undefined), 5000, "the partition read again from the skip");
    expect(h.counters.offsetsSkipped).toBe(7);
    // What the read again hands out: the skipped records, then what was handed out already.
    h.hand([5, 6, 7, 8, 9, 10, 11, 12, 13, 14].map((o) => msg(o, valid(o))));
    await h.d.settle();
  } finally {
    setLogSink();
  }
  const stored = h.events.filter((e) => e.startsWith("insert")).flatMap((e) => e.slice(7).split(","));
  expect(stored.sort()).toEqual(Array.from({ length: 15 }, (_, i) => `r${i}`).sort());
  // 12-14 come again by the worker's own seek back to 5: said as such, not counted as librdkafka's repeats.
  expect(h.counters.recordsRepeated).toBe(0);
  const again = lines.filter((l) => String(l.msg).startsWith("records read again after the seek back"));
  expect(again.map((l) => [l.level, l.from, l.to, l.records])).toEqual([["info", 12, 15, 3]]);
  expect(lines.filter((l) => String(l.msg).startsWith("librdkafka handed out"))).toEqual([]);
  expect(h.events.filter((e) => e.startsWith("commit")).at(-1)).toBe("commit 15");
  // No commit passed 5 before the records read again were stored.
  const firstPast = h.events.findIndex((e) => e.startsWith("commit") && Number(e.slice(7)) > 5);
  expect(firstPast).toBeGreaterThan(h.events.findIndex((e) => e.startsWith("insert") && e.includes("r5")));
});

test("the breaker pauses every partition through the gate; what was handed over before is still stored and committed", async () => {
  const h = harness({ dlqMaxRatio: 0.5 });
  // Valid records count when their batch settles: the ten rejections fill the window of 10 first.
  h.hand(Array.from({ length: 14 }, (_, i) => msg(i, i < 4 ? valid(i) : "{broken")));
  expect(h.d.tripped).toBe(true);
  expect(h.paused.has(0)).toBe(true);
  await h.d.settle();
  expect(h.events).toContain("insert r0,r1,r2,r3");
  expect(h.events.at(-1)).toBe("commit 14");
  expect(h.fatal).toEqual([]);
});

test("a batch whose refused rows would trip the breaker is held, not dead-lettered: consumption pauses, and it goes on once ClickHouse takes it whole", async () => {
  let refusing = false;
  const h = harness({ dlqMaxRatio: 0.2, refusing: () => refusing });
  h.hand(Array.from({ length: 8 }, (_, i) => msg(i, valid(i))));
  await h.d.settle();
  refusing = true;
  h.hand(Array.from({ length: 4 }, (_, i) => msg(8 + i, valid(8 + i))));
  const flushed = h.d.settle();
  await waitFor(() => (h.d.tripped ? true : undefined), 5000, "the breaker tripped by the batch it holds");
  expect(h.paused.has(0)).toBe(true);
  refusing = false;
  await flushed;
  expect(h.events).not.toContain("dlq");
  expect(h.events).toContain("insert r8,r9,r10,r11");
  expect([h.d.tripped, h.paused.has(0)]).toEqual([false, false]);
  expect(h.events.filter((e) => e.startsWith("commit")).at(-1)).toBe("commit 12");
});

test("a batch the breaker holds goes to the DLQ on the operator's word (the breaker's reset)", async () => {
  const h = harness({ dlqMaxRatio: 0.2, refusing: () => true });
  h.hand(Array.from({ length: 4 }, (_, i) => msg(i, valid(i))));
  // The window fills with the first batch's four refused rows and six rejections: nothing sent yet.
  h.hand(Array.from({ length: 6 }, (_, i) => msg(4 + i, "{broken")));
  const flushed = h.d.settle();
  await waitFor(() => (h.d.tripped ? true : undefined), 5000, "tripped");
  expect(h.d.resetBreaker()).toBe(true);
  await flushed;
  expect(h.events.filter((e) => e === "dlq").length).toBe(10);
  expect(h.events.filter((e) => e.startsWith("commit")).at(-1)).toBe("commit 10");
});

// After a broker restart the group's coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it has
// loaded the groups: a commit refused so advanced nothing, and the same one a moment later succeeds.
// It stopped the worker, which then had to be restarted by its supervisor.
test("regression: a commit refused with a retryable error (the coordinator loading) is sent again, not fatal; a final one still is", async () => {
  const loading = kafkaError("KAFKA_COMMIT", "commit", 14); // COORDINATOR_LOAD_IN_PROGRESS, as consumer.commit throws it
  expect(loading.retryable).toBe(true);
  const h = harness({ commitRefusals: [loading] });
  h.hand([msg(0, valid(0)), msg(1, valid(1))]);
  await h.d.settle();
  await waitFor(() => (h.events.includes("commit 2") ? true : undefined), 5000, "the commit sent again");
  expect(h.events.filter((e) => e.startsWith("refused") || e.startsWith("commit"))).toEqual(["refused 2", "commit 2"]);
  expect(h.fatal).toEqual([]);
  expect(h.counters.commitsRefused).toBe(1);

  const denied = kafkaError("KAFKA_COMMIT", "commit", 30); // GROUP_AUTHORIZATION_FAILED: no retry helps
  const g = harness({ commitRefusals: [denied] });
  g.hand([msg(0, valid(0))]);
  await g.d.settle().catch(() => {});
  await waitFor(() => (g.fatal.length > 0 ? true : undefined), 5000, "the refusal reported as fatal");
  expect(g.fatal).toEqual([denied]);
});

// A payload of control characters escapes to six bytes each in its envelope: the DLQ's budget of
// sends awaited counts the envelopes as written, or 32 such records of 1 MB would queue ~190 MiB.
test("the DLQ sends awaited are bounded by their envelopes' bytes as written, not by their payloads' characters", () => {
  const unanswered = { produce: () => new Promise(() => {}) };
  const dlq = new DlqPublisher(unanswered, { topic: "cdr.raw.dlq", workerInstance: "w", storageFailureReason: "normalization_error" });
  const h = harness({ dlq });
  const controls = "\u0001".repeat(1_000_000);
  const decoded = decode(enc.encode(controls), ctx);
  if (decoded.ok) throw new Error("control characters decoded as a record");
  const envelope = dlq.encodeRejection(decoded.rejection, { topic: "cdr.raw", partition: 0, offset: 0 });
  expect(envelope.bytes).toBeGreaterThan(6_000_000);
  // 32 MiB hold five such envelopes and not six: the sixth fills the budget.
  for (let i = 0; i < 5; i++) h.hand([msg(i, controls)]);
  expect(h.d.full).toBe(false);
  h.hand([msg(5, controls)]);
  expect(h.d.full).toBe(true);
});

// Under exactly-once an envelope waits until every earlier record of its partition is durable, so
// its transaction's commit passes it. The assignment lost meanwhile, the wait ends unsent: left
// waiting on a tracker that was reset, it would hold every later settle.
test("exactly-once: an envelope waiting for its partition's earlier rows ends unsent when the assignment is lost", async () => {
  const insert = Promise.withResolvers<void>();
  const transactions = { commit: async () => true, abandon: async () => {}, refusal: "" } as unknown as DeliveryDeps["transactions"];
  const h = harness({ transactions, insertGate: insert.promise });
  h.hand(Array.from({ length: 100 }, (_, i) => msg(i, valid(i)))); // a full batch: sealed, its insert held
  h.hand([msg(100, "{broken")]);
  await Bun.sleep(0);
  expect(h.events.filter((e) => e === "dlq")).toEqual([]); // waits for the batch before it
  h.d.abandon();
  insert.resolve();
  const settled = await Promise.race([h.d.settle().then(() => "settled"), Bun.sleep(2_000).then(() => "held")]);
  expect(settled).toBe("settled");
  expect(h.events.filter((e) => e === "dlq")).toEqual([]);
  expect(h.fatal).toEqual([]);
});

// A partition whose commit carries no metadata (added to the topic, reset, or last committed by a
// release without it) gets a first mark from its replay check, through the open transaction. That
// transaction may hold another partition's envelopes: the mark's commit carries that partition's
// standing position, or the envelopes would lie past their commit and every try would abort.
test("exactly-once: a partition's first mark commits beside the open transaction's envelopes of another partition", async () => {
  const sent: string[] = [];
  // An envelope's delivery report comes with the commit's flush: until then it is in the open
  // transaction and its record not durable, so this member's own commit has not begun.
  const reports: Array<() => void> = [];
  const producer = {
    init: async () => {},
    begin: () => void sent.push("begin"),
    produce: () => new Promise((resolve) => reports.push(() => resolve({ partition: 0, offset: 0 }))),
    flush: async () => void reports.splice(0).forEach((r) => r()),
    sendOffsets: async (offsets: readonly TopicPartition[]) => void sent.push(`offsets ${offsets.map((o) => `${o.partition}@${o.offset}`).join(",")}`),
    commit: async () => void sent.push("commit"),
    abort: async () => void sent.push("abort"),
    close: () => {},
  } as TransactionalProducer<{ destroy(): void }>;
  const transactions = new TransactionalCommits(producer, { group: () => ({ destroy: () => {} }), owns: () => true, topic: "cdr.raw", timeoutMs: 10_000 });
  const dlq = new DlqPublisher(transactions, { topic: "cdr.raw.dlq", workerInstance: "t", storageFailureReason: "normalization_error" });
  const marked: string[] = [];
  const finder: ReplayFinder = {
    findDelivered: async (partitions, commitMarks) => {
      await commitMarks(partitions.map((partition) => ({ topic: "cdr.raw", partition, offset: 5n, metadata: "mark" })));
      marked.push(...partitions.map(String));
      return new Map();
    },
  };
  const h = harness({ transactions, dlq, finder });
  h.hand([msg(0, "{broken")]); // partition 0: its envelope joins the open transaction
  await waitFor(() => (sent.includes("begin") ? true : undefined), 5000, "the envelope sent");
  h.d.assigned([{ topic: "cdr.raw", partition: 1 }]);
  await waitFor(() => (h.d.replayChecksPending === 0 ? true : undefined), 5000, "the check of partition 1 done");
  expect(marked).toEqual(["1"]);
  expect(sent.slice(0, 3)).toEqual(["begin", "offsets 1@5,0@1", "commit"]);
  expect([h.counters.replayCheckFailures, h.fatal.length]).toEqual([0, 0]);
});

// The membership facts come from scripts/librdkafka/patches/heartbeat-facts.patch. A library without
// it (LIBRDKAFKA_PATH) shows the group in its statistics and none of them: no insert would ever be
// proven, so the worker stops at the first statistics and says why.
test("exactly-once: statistics from a librdkafka without the heartbeat facts stop the worker, naming the patch and the way out", () => {
  const transactions = { commit: async () => true, abandon: async () => {}, refusal: "" } as unknown as DeliveryDeps["transactions"];
  const h = harness({ transactions, delivered: [], standing: { kind: "unpatched" } });
  expect(h.fatal).toHaveLength(1);
  const e = h.fatal[0] as CdrWorkerError;
  expect([e.code, e.retryable]).toEqual(["LIBRARY_UNAVAILABLE", false]);
  expect(e.message).toContain("heartbeat-facts patch");
  expect(e.message).toContain("DELIVERY=at-least-once");
});

// Under KIP-848 the group's session is the broker's, read again while the worker runs
// (kafka/session-watch.ts): a longer one lengthens the lease the last accepted heartbeat gives, at once.
test("the group's session read anew re-measures the lease from the last accepted heartbeat", async () => {
  // Accepted 50 s ago: past a 45 s session's lease, within a 120 s one's.
  const h = harness({ delivered: [], standing: { kind: "accepted", sentAfter: performance.now() - 50_000, rebalanceSince: null } });
  h.d.assigned([{ topic: "cdr.raw", partition: 0 }]);
  h.hand([msg(0, valid(0))]);
  const settled = h.d.settle();
  await waitFor(() => (h.d.awaitingMembership ? true : undefined), 5000, "the insert waiting for a lease");
  expect(h.events.filter((e) => e.startsWith("insert"))).toEqual([]);
  h.d.sessionChanged(120_000);
  await waitFor(() => (h.events.includes("insert r0") ? true : undefined), 5000, "the insert sent");
  await settled;
  expect(h.events.filter((e) => e.startsWith("insert"))).toEqual(["insert r0"]);
});
