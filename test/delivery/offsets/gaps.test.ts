// Every offset handed over accounted for: the tracker reports each range of offsets never handed
// over (a jump between records, past the committed offset at an assignment, or to librdkafka's
// position), and Gaps tells the range apart by the partition's log start: expired below it, passed
// over (transaction markers, aborted records) at or above it.
import { afterEach, beforeEach, expect, setDefaultTimeout, test } from "bun:test";
import type { Clock } from "../../../src/delivery/clock.ts";
import { Gaps, type Gap } from "../../../src/delivery/offsets/gaps.ts";
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
