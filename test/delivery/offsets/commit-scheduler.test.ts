// The commit scheduler on the pure tracker, with a commit function standing in for the consumer.
import { expect, setDefaultTimeout, test } from "bun:test";
import { CommitScheduler } from "../../../src/delivery/offsets/commit-scheduler.ts";
import { OffsetTracker } from "../../../src/delivery/offsets/tracker.ts";

setDefaultTimeout(60_000);

test("a burst of acknowledgements while a commit runs costs one more commit, of the latest positions", async () => {
  const tracker = new OffsetTracker();
  tracker.reset([0]);
  const holds = Array.from({ length: 100 }, (_, i) => tracker.trackAlone(0, i));
  const commits: number[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const s = new CommitScheduler(tracker, async (positions) => {
    commits.push(positions[0]!.offset);
    if (commits.length === 1) await gate; // the first commit is slow
  }, (e) => { throw e; });
  holds[0]!.done = true;
  s.schedule();
  await Promise.resolve();
  await Promise.resolve();
  for (const h of holds.slice(1)) {
    h.done = true;
    s.schedule();
  }
  release();
  await s.settled();
  expect(commits).toEqual([1, 100]);
});

test("a failed commit reaches the error handler, and nothing commits after stop()", async () => {
  const tracker = new OffsetTracker();
  tracker.reset([0]);
  const h = tracker.trackAlone(0, 0);
  const errors: unknown[] = [];
  let calls = 0;
  const s = new CommitScheduler(tracker, async () => { calls++; throw new Error("commit refused"); }, (e) => errors.push(e));
  h.done = true;
  s.schedule();
  await s.settled();
  expect(errors.map((e) => (e as Error).message)).toEqual(["commit refused"]);
  s.stop();
  tracker.trackAlone(0, 1).done = true;
  s.schedule();
  await s.settled();
  expect(calls).toBe(1);
});

test("with a spacing, a commit starts no sooner than the spacing after the last one began; what came meanwhile goes in it", async () => {
  const tracker = new OffsetTracker();
  tracker.reset([0]);
  const holds = Array.from({ length: 10 }, (_, i) => tracker.trackAlone(0, i));
  let now = 1_000;
  const slept: number[] = [];
  const clock = {
    mono: () => now,
    sleep: async (ms: number) => {
      slept.push(ms);
      now += ms;
    },
  };
  const commits: Array<{ at: number; offset: number }> = [];
  const s = new CommitScheduler(tracker, async (positions) => {
    commits.push({ at: now, offset: positions[0]!.offset });
    now += 30; // the commit itself takes 30 ms
  }, (e) => { throw e; }, { spacingMs: 100, clock });
  holds[0]!.done = true;
  s.schedule();
  await s.settled();
  // 40 ms after the first began: the second waits out the other 60.
  now += 10;
  for (const h of holds.slice(1, 5)) {
    h.done = true;
    s.schedule();
  }
  holds[5]!.done = true; // acknowledged during the wait: it goes in the same commit
  await s.settled();
  // Long after: no wait.
  now += 500;
  for (const h of holds.slice(6)) h.done = true;
  s.schedule();
  await s.settled();
  expect(commits).toEqual([{ at: 1_000, offset: 1 }, { at: 1_100, offset: 6 }, { at: 1_630, offset: 10 }]);
  expect(slept).toEqual([60]);
});
