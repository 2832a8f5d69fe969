// Every offset handed over accounted for: the tracker reports each range of offsets never handed
// over (a jump between records, past the committed offset at an assignment, or to librdkafka's
// position), and Gaps tells the range apart by the partition's log start: expired below it, passed
// over (transaction markers, aborted records) at or above it.
import { afterEach, beforeEach, expect, setDefaultTimeout, test } from "bun:test";
import type { Clock } from "../../../src/time/clock.ts";
import { Gaps, READS, type Gap } from "../../../src/delivery/offsets/gaps.ts";
import { OffsetTracker } from "../../../src/delivery/offsets/tracker.ts";
import { setLogSink } from "../../../src/log.ts";
import { Counters } from "../../../src/stats/counters.ts";

setDefaultTimeout(60_000);

let lines: Array<Record<string, unknown>> = [];
beforeEach(() => {
  lines = [];
  setLogSink((line) => lines.push(JSON.parse(line)));
});
afterEach(() => setLogSink());

/** A clock whose timers run when `run()` says. */
function stepClock() {
  let mono = 0;
  let timers: Array<{ at: number; fn: () => void }> = [];
  const clock: Clock = {
    now: () => 1_700_000_000_000 + mono,
    mono: () => mono,
    setTimeout: (fn, ms) => {
      timers.push({ at: mono + ms, fn });
      return () => {};
    },
    sleep: async (ms) => void (mono += ms),
    yield: async () => {},
  };
  /** Moves time by `ms` and runs the timers due, then lets their promises settle. */
  const run = async (ms: number) => {
    mono += ms;
    const due = timers.filter((t) => t.at <= mono);
    timers = timers.filter((t) => t.at > mono);
    for (const t of due) t.fn();
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  return { clock, run };
}

function tracked() {
  const gaps: Gap[] = [];
  const t = new OffsetTracker(() => 0, (partition, from, to) => gaps.push({ partition, from, to }));
  return { t, gaps };
}

test("the tracker reports a jump between records, one past the committed offset, and a move to librdkafka's position", () => {
  const { t, gaps } = tracked();
  t.startAt(0, 10);
  t.track(0, 15, {}); // the first record, 5 past the commit
  t.track(0, 16, {});
  t.trackAlone(0, 20).done = true; // a DLQ send after a jump
  t.track(1, 3, {}); // no start known: no gap
  expect(gaps).toEqual([
    { partition: 0, from: 10, to: 15 },
    { partition: 0, from: 17, to: 20 },
  ]);
  // Everything durable, librdkafka's position past the last record: the offsets between were passed over.
  for (const a of t.advanced()) void a;
  const { t: t2, gaps: g2 } = tracked();
  t2.trackAlone(2, 5).done = true;
  t2.advanced();
  expect(t2.passOver(2, 9)).toBe(true);
  expect(g2).toEqual([{ partition: 2, from: 6, to: 9 }]);
});

test("a start learned after the first records compares with the first one; a start at or past it is no gap; a new assignment starts afresh", () => {
  const { t, gaps } = tracked();
  t.track(0, 40, {});
  t.startAt(0, 25);
  t.startAt(0, 40);
  expect(gaps).toEqual([{ partition: 0, from: 25, to: 40 }]);
  // Records below the commit (a replay check's skip) are no gap; the next owner's start is forgotten at a reset.
  const { t: t2, gaps: g2 } = tracked();
  t2.startAt(1, 100);
  t2.trackAlone(1, 98).done = true;
  t2.reset([1]);
  t2.track(1, 500, {});
  expect(g2).toEqual([]);
});

test("a gap below the log start is expired, counted and said once; the rest is passed over; reads are at most one a second", async () => {
  const { clock, run } = stepClock();
  const counters = new Counters();
  const reads: number[][] = [];
  let logStart = 900;
  const gaps = new Gaps({
    counters,
    clock,
    logStarts: async (ps) => {
      reads.push([...ps]);
      return new Map(ps.map((p) => [p, logStart]));
    },
  });
  gaps.found({ partition: 0, from: 10, to: 900 }); // all below: expired
  gaps.found({ partition: 1, from: 850, to: 1000 }); // 50 expired, 100 passed over
  gaps.found({ partition: 2, from: 950, to: 951 }); // a commit marker
  expect(gaps.waiting).toBe(3);
  await run(0);
  expect(reads).toEqual([[0, 1, 2]]);
  expect(gaps.waiting).toBe(0);
  expect([counters.partition(0).expired, counters.partition(1).expired, counters.partition(2).expired]).toEqual([890, 50, 0]);
  expect([counters.partition(0).passedOver, counters.partition(1).passedOver, counters.partition(2).passedOver]).toEqual([0, 100, 1]);
  expect([counters.recordsExpired, counters.offsetsPassedOver]).toEqual([940, 101]);
  // One error line a gap with expired records, naming the range and the count.
  expect(lines.filter((l) => l.level === "error").map((l) => [l.partition, l.from, l.to, l.records])).toEqual([
    [0, 10, 900, 890],
    [1, 850, 900, 50],
  ]);
  // The next gap waits out the second since the last read, whatever the log start does meanwhile.
  logStart = 5_000;
  gaps.found({ partition: 0, from: 1200, to: 1201 });
  await run(500);
  expect(reads.length).toBe(1);
  await run(500);
  expect(reads.length).toBe(2);
  // The range counts as expired only up to the record handed over after it, which was not deleted.
  expect(counters.partition(0).expired).toBe(891);
});

test("a read that fails keeps its gaps and is tried again with backoff; nothing is counted twice", async () => {
  const { clock, run } = stepClock();
  const counters = new Counters();
  let fail = 2;
  const gaps = new Gaps({
    counters,
    clock,
    logStarts: async (ps) => {
      if (fail-- > 0) throw new Error("broker away");
      return new Map(ps.map((p) => [p, 100]));
    },
  });
  gaps.found({ partition: 0, from: 0, to: 100 });
  await run(0);
  expect(gaps.waiting).toBe(1);
  await run(1_000);
  expect(gaps.waiting).toBe(1);
  await run(1_999);
  expect(gaps.waiting).toBe(1);
  await run(1);
  expect(gaps.waiting).toBe(0);
  await run(60_000);
  expect(counters.recordsExpired).toBe(100);
});

/** A tracker whose gaps go to `gaps`, as the delivery wires them. */
function wired(skipsTold: boolean, logStart = 0) {
  const { clock, run } = stepClock();
  const counters = new Counters();
  const rewinds: Array<[number, number]> = [];
  const dead: Array<{ partition: number; offsets: number[]; reads: number }> = [];
  let t!: OffsetTracker;
  const gaps = new Gaps({
    counters,
    clock,
    logStarts: async (ps) => new Map(ps.map((p) => [p, logStart])),
    settle: (hold) => t.settle(hold),
    skips: skipsTold
      ? {
          rewind: (partition, from) => void rewinds.push([partition, from]),
          deadLetter: (partition, offsets, reads) => {
            dead.push({ partition, offsets, reads });
            for (const o of offsets) t.trackAlone(partition, o);
          },
        }
      : undefined,
  });
  t = new OffsetTracker(() => 0, (partition, from, to, hold) => gaps.found({ partition, from, to, hold }));
  const positions = () => t.advanced().map((a) => a.offset);
  return { t, gaps, counters, rewinds, dead, run, positions };
}

test("with a library that says what it passes over, a gap above the log start is a skip: counted, said, read again, the commit held at it", async () => {
  const w = wired(true);
  const batch = {};
  w.t.track(0, 0, batch)!.done = true;
  w.t.passed(0, 1); // a commit marker, said: no gap
  w.t.track(0, 5, {})!.done = true; // 2-4 skipped
  await w.run(0);
  expect([w.counters.offsetsSkipped, w.counters.partition(0).skipped, w.counters.offsetsPassedOver]).toEqual([3, 3, 0]);
  expect(lines.filter((l) => l.level === "error").map((l) => [l.msg, l.from, l.to, l.offsets])).toEqual([
    ["offsets were skipped: librdkafka moved past them without a record or a word; read again", 2, 5, 3],
  ]);
  expect(w.rewinds).toEqual([[0, 2]]);
  expect(w.positions()).toEqual([2]); // past the marker, not past the skip
  // Read again: 2-4 come back (not taken for records handed out twice), then 5 again, which is.
  for (const o of [2, 3, 4]) expect(w.t.consumedAlready(0, o)).toBe(false);
  const back = [2, 3, 4].map((o) => w.t.track(0, o, batch)!);
  expect(w.t.consumedAlready(0, 5)).toBe(true);
  expect(w.positions()).toEqual([]); // settled, but what came back is not durable yet
  for (const h of back) h.done = true;
  expect(w.positions()).toEqual([6]);
  expect(w.gaps.rereading).toBe(0);
  expect(w.dead).toEqual([]);
});

test("a skip still missing on every read gets an envelope an offset after the last, each held in the gap; a revoked partition's skip is forgotten", async () => {
  const w = wired(true);
  w.t.track(0, 0, {})!.done = true;
  w.t.track(0, 10, {})!.done = true;
  await w.run(0);
  expect(w.rewinds).toEqual([[0, 1]]);
  // Each read passes the range with nothing back: read again, READS in all.
  for (let read = 1; read < READS; read++) {
    expect(w.t.consumedAlready(0, 10)).toBe(true);
    expect(w.rewinds.length).toBe(read + 1);
  }
  expect(w.t.consumedAlready(0, 10)).toBe(true);
  expect(w.dead).toEqual([{ partition: 0, offsets: [1, 2, 3, 4, 5, 6, 7, 8, 9], reads: READS }]);
  expect(w.positions()).toEqual([1]); // the envelopes are not acknowledged yet
  expect(lines.filter((l) => String(l.msg).startsWith("offsets skipped on every read")).map((l) => l.offsets)).toEqual([9]);
  // A read that never passes (the partition paused) is asked again after a while, uncounted.
  w.t.track(1, 0, {})!.done = true;
  w.t.track(1, 3, {})!.done = true;
  await w.run(1_000);
  expect(w.rewinds.at(-1)).toEqual([1, 1]);
  await w.run(30_000);
  expect(w.rewinds.at(-1)).toEqual([1, 1]);
  expect(w.gaps.rereading).toBe(1);
  w.gaps.forget([1]);
  w.t.reset([1]);
  expect(w.gaps.rereading).toBe(0);
});

test("with a library that does not say what it passes over, a gap above the log start is passed over, settled at once", async () => {
  const w = wired(false, 3);
  w.t.track(0, 0, {})!.done = true;
  w.t.track(0, 6, {})!.done = true;
  expect(w.positions()).toEqual([1]);
  await w.run(0);
  expect([w.counters.recordsExpired, w.counters.offsetsPassedOver, w.counters.offsetsSkipped]).toEqual([2, 3, 0]);
  expect(w.rewinds).toEqual([]);
  expect(w.positions()).toEqual([7]);
});

test("regression: a read again that passed in time leaves its timer nothing to ask: the next read waits its own 30 s", async () => {
  const w = wired(true);
  w.t.track(0, 0, {})!.done = true;
  w.t.track(0, 10, {})!.done = true;
  await w.run(0);
  expect(w.rewinds.length).toBe(1);
  await w.run(20_000);
  expect(w.t.consumedAlready(0, 10)).toBe(true); // the first read passes the gap at 20 s: read again
  expect(w.rewinds.length).toBe(2);
  await w.run(10_000); // 30 s: the first read's timer, which once asked again here
  expect(w.rewinds.length).toBe(2);
  await w.run(20_000); // 50 s: the second read has not passed in its 30 s
  expect(w.rewinds.length).toBe(3);
});
