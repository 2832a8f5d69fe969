// The filler's own decisions, with a consumer and a store that the test drives (the real broker and
// servers: test/e2e/dlq-table.test.ts, test/clickhouse/dlq-table.test.ts): a revocation waits for
// the insert in flight; after a failure that may have stored, only the rows past the table's
// position go again; a refused insert is tried again, never dead-lettered.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { fillerMetricsText } from "../../src/dlq-table/filler-metrics.ts";
import { DlqFiller } from "../../src/dlq-table/filler.ts";
import type { DlqRow } from "../../src/dlq-table/row.ts";
import type { DlqStore } from "../../src/dlq-table/store.ts";
import type { Message } from "../../src/kafka/message.ts";
import { FakeConsumer } from "../support/filler-consumer.ts";

setDefaultTimeout(60_000);

const TOPIC = "dlq";
const enc = new TextEncoder();

function envelope(offset: number, partition = 0): Message {
  const value = enc.encode(encodeEnvelope({ reason: "malformed_json", field: null, payload: `x${offset}`, payloadIsObject: false }, new Date(0), "w"));
  return { topic: TOPIC, partition, offset, timestamp: -1, value, key: null, headers: [] };
}

/** A table the test can hold an insert of, fail one after it stored, or refuse one. */
class FakeStore implements DlqStore {
  rows: DlqRow[] = [];
  sent: number[][] = [];
  ended: string[] = [];
  hold: Promise<void> | null = null;
  /** What the next inserts do: store and then lose the answer, refuse, or (none) store. */
  faults: Array<"stored-then-lost" | "refused"> = [];
  async insert(rows: readonly DlqRow[], queryId: string) {
    this.sent.push(rows.map((r) => r.dlq_offset));
    if (this.hold) await this.hold;
    const fault = this.faults.shift();
    if (fault === "refused") throw new Error(`Code: 241. DB::Exception: Memory limit exceeded (${queryId})`);
    this.rows.push(...rows);
    if (fault === "stored-then-lost") throw new Error("socket hang up");
  }
  async endInsert(queryId: string) {
    this.ended.push(queryId);
  }
  async digestAt(partition: number, offset: number) {
    return this.rows.find((r) => r.dlq_partition === partition && r.dlq_offset === offset)?.payload_sha256 ?? null;
  }
  async positions(partitions: readonly number[]) {
    const out = new Map<number, number>();
    for (const r of this.rows) if (partitions.includes(r.dlq_partition)) out.set(r.dlq_partition, Math.max(out.get(r.dlq_partition) ?? -1, r.dlq_offset));
    return out;
  }
}

function options(batchRows = 10) {
  return {
    topic: TOPIC,
    batchRows,
    batchBytes: 1 << 20,
    flushIntervalMs: 10,
    maxBufferedBytes: 1 << 20,
    requestTimeoutMs: 5_000,
    drainTimeoutMs: 5_000,
    lease: { sessionTimeoutMs: 45_000, rebalanceTimeoutMs: 300_000 },
    row: {},
    instance: "t",
  };
}

function filler(consumer: FakeConsumer, store: FakeStore, batchRows = 10) {
  return new DlqFiller(consumer, store, options(batchRows));
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(2);
  }
}

test("a partition starts past the table's position; what is below it is skipped, not stored again", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s);
  s.rows = [0, 1, 2].map((o) => ({ dlq_partition: 0, dlq_offset: o }) as DlqRow);
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2, 3, 4].map((o) => envelope(o));
  const run = f.run();
  await until(() => s.rows.length === 5, "offsets 3 and 4 stored");
  f.stop();
  await run;
  expect(s.rows.map((r) => r.dlq_offset)).toEqual([0, 1, 2, 3, 4]);
  expect(f.counts).toMatchObject({ skipped: 3, stored: 2 });
  expect(c.commits.at(-1)).toEqual({ topic: TOPIC, partition: 0, offset: 5n });
});

test("a stop waits for the commit of what it stored before closing: the group's offset is the table's position", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s);
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2].map((o) => envelope(o));
  let release!: () => void;
  c.commitHold = new Promise((r) => (release = r));
  const run = f.run();
  await until(() => s.rows.length === 3, "offsets 0 to 2 stored");
  f.stop();
  setTimeout(release, 50);
  await run;
  expect(c.events).toEqual(["committed 0:3", "closed"]);
});

test("rows read while an insert runs go in one insert of up to backlogRows, at most batchBytes, and each in offset order", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = new DlqFiller(c, s, { ...options(3), backlogRows: 8 });
  let release!: () => void;
  s.hold = new Promise<void>((r) => (release = r));
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2].map((o) => envelope(o));
  const run = f.run();
  await until(() => s.sent.length === 1, "the first insert sent");
  c.queue = Array.from({ length: 12 }, (_, k) => envelope(3 + k));
  await until(() => c.queue.length === 0, "every record read while it runs");
  s.hold = null;
  release();
  await until(() => s.rows.length === 15, "all stored");
  f.stop();
  await run;
  // The first insert is due at BATCH_SIZE; the backlog behind it goes 8 rows at a time.
  expect(s.sent).toEqual([[0, 1, 2], [3, 4, 5, 6, 7, 8, 9, 10], [11, 12, 13, 14]]);
  expect(c.commits.at(-1)).toEqual({ topic: TOPIC, partition: 0, offset: 15n });
});

test("a revocation waits for the insert in flight; the partition's rows still buffered are dropped for the next owner", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s, 3);
  let release!: () => void;
  s.hold = new Promise<void>((r) => (release = r));
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2, 3, 4].map((o) => envelope(o));
  const run = f.run();
  await until(() => s.sent.length === 1, "the first insert sent");
  c.pendingRevoke = [{ topic: TOPIC, partition: 0 }];
  await Bun.sleep(50);
  expect(c.revokesCompleted).toBe(0); // the insert still runs: the partition is not given up
  release();
  await until(() => c.revokesCompleted === 1, "the revocation completed");
  f.stop();
  await run;
  // The insert in flight was not retried after the abort, and the buffered rows 3, 4 never went.
  expect(s.sent).toEqual([[0, 1, 2]]);
  expect(f.positions.size).toBe(0);
});

test("an insert whose answer was lost after it stored is ended, and only the rows past the position go again", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s, 4);
  s.faults = ["stored-then-lost"];
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2, 3, 4, 5, 6].map((o) => envelope(o));
  const run = f.run();
  await until(() => s.rows.length === 7, "all stored");
  f.stop();
  await run;
  expect(s.rows.map((r) => r.dlq_offset)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  expect(s.ended).toEqual(["cdr-dlq-fill:t:0:1"]);
  expect(s.sent[0]).toEqual([0, 1, 2, 3]);
  expect(s.sent).not.toContainEqual([0, 1, 2, 3, 4, 5, 6]);
  expect(f.counts.lostAnswers).toBe(1);
});

test("refused inserts are tried again until one goes: nothing is dead-lettered or dropped", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s, 10);
  s.faults = ["refused", "refused", "refused"];
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  c.queue = [0, 1, 2].map((o) => envelope(o));
  const run = f.run();
  await until(() => s.rows.length === 3, "stored after three refusals");
  f.stop();
  await run;
  expect(f.counts).toMatchObject({ failedInserts: 3, stored: 3 });
  expect(s.sent).toEqual([[0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2]]);
});

test("a table filled from another topic (the topic made anew) stops the filler with a line naming the offset; a record retention removed passes", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  s.rows = [{ dlq_partition: 0, dlq_offset: 4, payload_sha256: "digest of the old topic's record" } as DlqRow];
  const topicRecord = envelope(4);
  const f = new DlqFiller(c, s, { ...options(), recordAt: async () => topicRecord });
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  expect(await f.run().then(() => "ran", (e: Error) => e.message)).toContain(
    "the DLQ table holds a row at dlq partition 0 offset 4, and the topic has no committed record there or one of another payload",
  );
  expect(s.sent).toEqual([]);
  const c2 = new FakeConsumer();
  const g = new DlqFiller(c2, s, { ...options(), recordAt: async () => "gone" });
  c2.assigned = [[{ topic: TOPIC, partition: 0 }]];
  const run = g.run();
  await until(() => g.positions.get(0) === 5, "the position past the table's row");
  g.stop();
  await run;
});

test("/metrics: the table's lag in records and seconds per partition, rows stored and unreadable, inserts failed", async () => {
  const c = new FakeConsumer(), s = new FakeStore();
  const f = filler(c, s);
  c.assigned = [[{ topic: TOPIC, partition: 0 }]];
  // Four envelopes and a record that is no envelope; the topic's end is past them (more not fetched yet).
  const notEnvelope: Message = { topic: TOPIC, partition: 0, offset: 4, timestamp: -1, value: enc.encode("not json"), key: null, headers: [] };
  c.queue = [...[0, 1, 2, 3].map((o) => envelope(o)), notEnvelope];
  c.high.set(0, 8);
  s.faults = ["refused"];
  const run = f.run();
  await until(() => s.rows.length === 5, "offsets 0 to 4 stored");
  const t0 = performance.now();
  expect(f.lag(t0)).toEqual([{ partition: 0, records: 3, seconds: 0 }]);
  expect(f.lag(t0 + 90_000)).toEqual([{ partition: 0, records: 3, seconds: 90 }]);
  const text = fillerMetricsText(f);
  expect(text).toContain('cdr_worker_dlq_table_lag_records{partition="0"} 3\n');
  expect(text).toContain("cdr_worker_dlq_table_rows_stored_total 5\n");
  expect(text).toContain("cdr_worker_dlq_table_rows_unreadable_total 1\n");
  expect(text).toContain("cdr_worker_dlq_table_inserts_failed_total 1\n");
  expect(text).toContain("cdr_worker_dlq_table_inserts_total 2\n");
  // Caught up: no lag, and the seconds start again from here.
  c.high.set(0, 5);
  expect(f.lag(t0 + 100_000)).toEqual([{ partition: 0, records: 0, seconds: 0 }]);
  c.high.set(0, 6);
  expect(f.lag(t0 + 130_000)).toEqual([{ partition: 0, records: 1, seconds: 30 }]);
  // A transaction's marker at 5, nothing after: the consumer stands past it, and no row is missing.
  c.position.set(0, 6);
  expect(f.lag(t0 + 140_000)).toEqual([{ partition: 0, records: 0, seconds: 0 }]);
  f.stop();
  await run;
});
