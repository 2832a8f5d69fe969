import { expect, setDefaultTimeout, test } from "bun:test";
import { OffsetTracker } from "../../../src/delivery/offsets/tracker.ts";

setDefaultTimeout(60_000);

const positions = (t: OffsetTracker) => t.advanced().map(({ partition, offset }) => ({ partition, offset }));

test("valid, invalid, valid on one partition: the invalid record's offset waits for the preceding valid rows", () => {
  const t = new OffsetTracker();
  const batch = {};
  const dlq = {};
  const h0 = t.track(0, 10, batch)!;
  const h1 = t.track(0, 11, dlq)!;
  const h2 = t.track(0, 12, batch)!;
  h1.done = true; // DLQ acknowledged first
  expect(positions(t)).toEqual([]); // offset 10 is not durable yet
  h0.done = true;
  h2.done = true; // the batch flushed
  expect(positions(t)).toEqual([{ partition: 0, offset: 13 }]);
  expect(positions(t)).toEqual([]); // handed out once
});

test("an invalid record with nothing uncommitted before it is committable at once", () => {
  const t = new OffsetTracker();
  const h = t.track(1, 5, {})!;
  h.done = true;
  expect(positions(t)).toEqual([{ partition: 1, offset: 6 }]);
});

test("consecutive records of one destination share one hold; positions never move backwards", () => {
  const t = new OffsetTracker();
  const batch = {};
  const first = t.track(0, 0, batch);
  expect(first).not.toBeNull();
  expect(t.track(0, 1, batch)).toBeNull();
  expect(t.track(0, 2, batch)).toBeNull();
  expect(positions(t)).toEqual([]); // the one hold covers 0…2
  first!.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 3 }]);
  expect(positions(t)).toEqual([]);
});

test("partitions are independent", () => {
  const t = new OffsetTracker();
  const a = t.track(0, 100, {})!;
  const b = t.track(1, 7, {})!;
  b.done = true;
  expect(positions(t)).toEqual([{ partition: 1, offset: 8 }]);
  a.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 101 }]);
});

test("a later batch finishing first does not advance past an earlier unfinished one", () => {
  const t = new OffsetTracker();
  const b1 = {};
  const b2 = {};
  const h1 = t.track(0, 0, b1)!;
  const h2 = t.track(0, 1, b2)!;
  h2.done = true;
  expect(positions(t)).toEqual([]);
  h1.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 2 }]);
});

test("reset forgets revoked partitions", () => {
  const t = new OffsetTracker();
  t.track(0, 1, {});
  t.reset([0]);
  expect(t.positions().size).toBe(0);
  expect(positions(t)).toEqual([]);
});

test("long runs compact their hold queue without losing positions", () => {
  const t = new OffsetTracker();
  for (let i = 0; i < 5000; i++) t.track(0, i, {})!.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 5000 }]);
  const h = t.track(0, 5000, {})!;
  h.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 5001 }]);
});

test("trackAlone gives every record a hold of its own, even back to back on one partition", () => {
  const t = new OffsetTracker();
  t.reset([0]);
  const a = t.trackAlone(0, 0);
  const b = t.trackAlone(0, 1);
  expect(a).not.toBe(b);
  b.done = true;
  expect(positions(t)).toEqual([]); // offset 0 is not durable yet: nothing to commit
  a.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 2 }]);
});

test("a commit the group refused is handed out again for a partition still owned, never for one revoked since", () => {
  const t = new OffsetTracker();
  t.trackAlone(0, 0).done = true;
  t.trackAlone(1, 0).done = true;
  const sent = positions(t);
  expect(sent).toEqual([{ partition: 0, offset: 1 }, { partition: 1, offset: 1 }]);
  expect(positions(t)).toEqual([]);
  t.reset([1]); // partition 1 was revoked while the commit was refused
  t.refused(sent);
  expect(positions(t)).toEqual([{ partition: 0, offset: 1 }]);
  expect(t.positions().get(0)!.committed).toBe(-1); // nothing the group acknowledged yet
  t.confirm([{ partition: 0, offset: 1 }]);
  expect(t.positions().get(0)!.committed).toBe(1);
  t.refused([{ partition: 0 }]); // a refusal after a confirmed commit hands out nothing new
  expect(positions(t)).toEqual([]);
});

test("each position comes with when the record at it was consumed, or the time of asking when none waits there", () => {
  const t = new OffsetTracker();
  const batch = {};
  const first = t.track(0, 0, batch)!;
  const dlq = t.trackAlone(0, 1);
  first.at = 1000; // consumed at 1000 and 2000 (set by hand: the tracker stamps Date.now())
  dlq.at = 2000;
  first.done = true;
  // Offset 1 waits: the next owner must look for what was delivered from 1 on since it was consumed.
  expect(t.advanced(5000)).toEqual([{ partition: 0, offset: 1, since: 2000 }]);
  dlq.done = true;
  // Nothing waits: no record at 2 or later was handed to a destination before this moment.
  expect(t.advanced(6000)).toEqual([{ partition: 0, offset: 2, since: 6000 }]);
});

test("whenReached: an envelope waits for the batch before it, not for envelopes; a batch's later hold waits for the batch itself", () => {
  const t = new OffsetTracker();
  const b1 = {}, b2 = {};
  const reached: string[] = [];
  const first = t.track(0, 0, b1)!; // rows 0-1 of batch 1
  t.track(0, 1, b1);
  const e2 = t.trackAlone(0, 2); // an invalid record between two runs of batch 1
  const later = t.track(0, 3, b1)!;
  const e4 = t.trackAlone(0, 4);
  const next = t.track(0, 5, b2)!;
  const other = t.trackAlone(1, 0); // another partition: nothing before it
  t.whenReached(first, () => reached.push("batch 1"));
  t.whenReached(e2, () => reached.push("e2"));
  t.whenReached(e4, () => reached.push("e4"));
  t.whenReached(next, () => reached.push("batch 2"));
  t.whenReached(other, () => reached.push("p1 e0"));
  expect(reached).toEqual(["batch 1", "p1 e0"]);
  expect(later.onReached).toBeUndefined();
  first.done = later.done = true; // batch 1 stored
  t.reach(0);
  // Envelopes in flight do not hold what follows: their reports come before the next commit.
  expect(reached).toEqual(["batch 1", "p1 e0", "e2", "e4", "batch 2"]);
  expect(e2.done || e4.done).toBe(false);
});

test("librdkafka's position past a transaction's commit marker is taken once every record is durable, never before", () => {
  const t = new OffsetTracker(() => 0);
  const batch = {};
  const h = t.track(0, 0, batch)!; // records 0-9, one batch
  for (let o = 1; o < 10; o++) t.track(0, o, batch);
  // The producer's commit marker takes offset 10: librdkafka stands at 11.
  expect(t.passOver(0, 11)).toBe(false); // the batch is not durable yet
  expect(positions(t)).toEqual([]);
  h.done = true;
  expect(t.passOver(0, 10)).toBe(false); // nothing past what was handed over
  expect(t.passOver(0, 11)).toBe(true);
  expect(positions(t)).toEqual([{ partition: 0, offset: 11 }]);
  // The records after the marker go on from there.
  t.track(0, 11, {})!.done = true;
  expect(positions(t)).toEqual([{ partition: 0, offset: 12 }]);
  expect(t.passOver(5, 3)).toBe(false); // a partition nothing was handed over for
});

test("a seek back of the worker's own: what it consumed from there on comes again by its doing, until a record past it", () => {
  const t = new OffsetTracker();
  const batch = {};
  for (let o = 0; o < 15; o++) t.track(0, o, batch);
  t.rewound(0, 5);
  expect([4, 5, 12, 14, 15].map((o) => t.byOwnSeek(0, o))).toEqual([false, true, true, true, false]);
  expect(t.byOwnSeek(1, 5)).toBe(false);
  // The repeats end where the read again passes what was consumed: a repeat after that is librdkafka's.
  t.track(0, 15, batch);
  expect(t.byOwnSeek(0, 12)).toBe(false);
  // A new assignment starts the partition afresh.
  t.rewound(0, 3);
  expect(t.byOwnSeek(0, 10)).toBe(true);
  t.reset([0]);
  expect(t.byOwnSeek(0, 10)).toBe(false);
});
