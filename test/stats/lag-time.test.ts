// Lag in time from the timestamps read at the committed offsets: what each reading means, with the
// reads given (the reads themselves run against the broker in test/e2e/lag-time.test.ts).
import { expect, setDefaultTimeout, test } from "bun:test";
import { LagTime } from "../../src/stats/lag-time.ts";

setDefaultTimeout(60_000);

function clock(owned: Array<{ partition: number; committed: number; high: number | null }>, answers: Map<number, number | null>) {
  const asked: Array<Map<number, number>> = [];
  const lag = new LagTime({ owned: () => owned, timesAt: async (o) => (asked.push(new Map(o)), answers) }, 0);
  return { lag, asked };
}

test("the age is the clock minus the timestamp at the committed offset; caught up is 0; unread is unknown", async () => {
  const now = 1_000_000_000_000;
  const { lag, asked } = clock(
    [
      { partition: 0, committed: 10, high: 50 },
      { partition: 1, committed: 7, high: 7 },
      { partition: 2, committed: -1, high: 3 },
      { partition: 3, committed: 4, high: 9 },
    ],
    new Map<number, number | null>([[0, now - 90_000], [1, null]]),
  );
  expect(lag.seconds(0, 10, 50, now)).toBeNull();
  await lag.refresh();
  // Every partition with a commit is read, whatever the consumer's cached watermark says.
  expect([...asked[0]!]).toEqual([[0, 10], [1, 7], [3, 4]]);
  expect(lag.seconds(0, 10, 50, now)).toBe(90);
  expect(lag.seconds(0, 10, 50, now + 30_000)).toBe(120);
  expect(lag.seconds(1, 7, 7, now)).toBe(0);
  // A paused partition whose cached watermark stopped: caught up when read, records since unseen.
  expect(lag.seconds(1, 7, 7 /* stale */, now)).toBe(0);
  expect(lag.seconds(2, -1, 3, now)).toBeNull();
  // No answer for partition 3: unknown, not 0.
  expect(lag.seconds(3, 4, 9, now)).toBeNull();
  // Committed past the record read, and the consumer sees nothing waiting: 0.
  expect(lag.seconds(0, 50, 50, now)).toBe(0);
  // Committed past it with records still waiting: the read record's age, an upper bound until the next read.
  expect(lag.seconds(0, 30, 50, now)).toBe(90);
  // A commit gone back before the offset read (another owner's): unknown.
  expect(lag.seconds(0, 5, 50, now)).toBeNull();
});

test("a partition no longer owned is forgotten; a failed read keeps what was known and is said, not thrown", async () => {
  const owned = [{ partition: 0, committed: 10, high: 50 }];
  let fail = false;
  const lag = new LagTime(
    {
      owned: () => owned,
      timesAt: async () => {
        if (fail) throw new Error("broker gone");
        return new Map([[0, Date.now() - 5000]]);
      },
    },
    0,
  );
  await lag.refresh();
  expect(lag.seconds(0, 10, 50)).toBeGreaterThanOrEqual(5);
  fail = true;
  await lag.refresh();
  expect(lag.seconds(0, 10, 50)).toBeGreaterThanOrEqual(5);
  fail = false;
  owned.length = 0;
  await lag.refresh();
  expect(lag.seconds(0, 10, 50)).toBeNull();
  await lag.stop();
});
