// The replay check's order without services: what the last owner left is read, the partitions it
// left nothing for get their start marked first, and ClickHouse is asked only after the inserts
// still running there have ended.
import { expect, setDefaultTimeout, test } from "bun:test";
import { commitMetadata } from "../../../src/delivery/offsets/commit-metadata.ts";
import { findDelivered, type Owned } from "../../../src/delivery/offsets/replay-check.ts";

setDefaultTimeout(60_000);

test("marked partitions are checked from their commit; unmarked ones get their start committed with metadata", async () => {
  const calls: string[] = [];
  const found = await findDelivered([0, 1, 2], {
    topic: "cdr.raw",
    now: () => 5000,
    committed: async () => [
      { topic: "cdr.raw", partition: 0, offset: 100n, metadata: commitMetadata(1000) },
      { topic: "cdr.raw", partition: 1, offset: -1001n }, // never committed
      { topic: "cdr.raw", partition: 2, offset: 7n }, // committed by a release without metadata
    ],
    lowWatermarks: async (ps) => new Map(ps.map((p) => [p, p === 1 ? 40 : 0])),
    highWatermarks: async (ps) => (calls.push(`ends ${ps.join(",")}`), new Map(ps.map((p) => [p, 200]))),
    commit: async (offsets) => void calls.push(`commit ${offsets.map((o) => `${o.partition}@${o.offset}:${o.metadata}`).join(" ")}`),
    insertsEnded: async () => void calls.push("inserts ended"),
    stored: async (owned: readonly Owned[]) => (calls.push(`stored ${JSON.stringify(owned)}`), new Map([[0, [100, 101]]])),
    deadLettered: async () => (calls.push("dead-lettered"), { offsets: new Map([[0, [102]], [9, [1]]]), digests: new Map() }),
  });
  expect(calls[0]).toBe(`commit 1@40:${commitMetadata(5000)} 2@7:${commitMetadata(5000)}`);
  expect(calls[1]).toBe("ends 0");
  expect(calls[2]).toBe("inserts ended");
  // What was stored is read from the commit to the end the check saw, one closed key range.
  expect(calls.slice(3).sort()).toEqual(["dead-lettered", `stored ${JSON.stringify([{ partition: 0, from: 100, since: 1000, to: 200 }])}`]);
  expect([...found].map(([p, s]) => [p, [...s.offsets].sort()])).toEqual([[0, [100, 101, 102]], [1, []], [2, []]]);
  // The since each partition was checked from: its commit's, or the time of the commit the check made.
  expect([...found].map(([p, s]) => [p, s.since])).toEqual([[0, 1000], [1, 5000], [2, 5000]]);
  // Below the end the check saw, what it did not find is looked up again before it is sent; the
  // partitions it marked hold nothing of a last owner's.
  expect([...found].map(([p, s]) => [p, s.unsureBelow])).toEqual([[0, 200], [1, undefined], [2, undefined]]);
  // The commit each partition stands at: what a renewal of the membership lease commits again.
  expect([...found].map(([p, s]) => [p, s.committed])).toEqual([[0, 100], [1, 40], [2, 7]]);
});

test("nothing to check: no query at all", async () => {
  const calls: string[] = [];
  const found = await findDelivered([0], {
    topic: "cdr.raw",
    committed: async () => [{ topic: "cdr.raw", partition: 0, offset: -1001n }],
    lowWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    highWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    commit: async () => void calls.push("commit"),
    insertsEnded: async () => void calls.push("inserts ended"),
    stored: async () => (calls.push("stored"), new Map()),
    deadLettered: async () => (calls.push("dead-lettered"), { offsets: new Map(), digests: new Map() }),
  });
  expect(calls).toEqual(["commit"]);
  expect(found.get(0)!.offsets.size).toBe(0);
});

// A per-partition error from committed() is not "never committed": committing the low watermark
// would move the partition's position back, and its records would be delivered again.
test("regression: a partition whose committed offset came back with an error fails the check (retried), committing nothing", async () => {
  const calls: string[] = [];
  const check = findDelivered([0, 1], {
    topic: "cdr.raw",
    committed: async () => [
      { topic: "cdr.raw", partition: 0, offset: -1001n, err: 16 },
      { topic: "cdr.raw", partition: 1, offset: 7n, metadata: commitMetadata(1000) },
    ],
    lowWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    highWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    commit: async () => void calls.push("commit"),
    insertsEnded: async () => void calls.push("inserts ended"),
    stored: async () => new Map(),
    deadLettered: async () => ({ offsets: new Map(), digests: new Map() }),
  });
  const err = await check.then(() => null, (e: unknown) => e as { retryable: boolean; message: string });
  expect(err?.retryable).toBe(true);
  expect(err?.message).toContain("partition 0");
  expect(calls).toEqual([]);
});

test("a transactional commit's partition is not read in the DLQ: below it every envelope is passed, past it none is visible", async () => {
  const asked: string[] = [];
  const found = await findDelivered([0, 1], {
    topic: "cdr.raw",
    committed: async () => [
      { topic: "cdr.raw", partition: 0, offset: 10n, metadata: commitMetadata(1000, true) },
      { topic: "cdr.raw", partition: 1, offset: 20n, metadata: commitMetadata(1000) },
    ],
    lowWatermarks: async () => new Map(),
    highWatermarks: async (ps) => new Map(ps.map((p) => [p, 30])),
    commit: async () => void asked.push("commit"),
    insertsEnded: async () => {},
    stored: async (owned) => (asked.push(`stored ${owned.map((o) => o.partition)}`), new Map([[0, [11]]])),
    deadLettered: async (owned) => (
      asked.push(`dead-lettered ${owned.map((o) => o.partition)}`),
      { offsets: new Map([[1, [21]]]), digests: new Map() }
    ),
  });
  expect(asked.sort()).toEqual(["dead-lettered 1", "stored 0,1"]);
  expect([...found].map(([p, f]) => [p, [...f.offsets], f.transactional])).toEqual([[0, [11], true], [1, [21], undefined]]);
});

// The group's offsets deleted (or the group renamed) after records were stored: no commit to read
// from, so the table is asked whether it holds anything past the position, and where it does every
// record below the end is looked up before it is sent (never skipped by offset alone).
test("a partition with no commit whose offsets the table already holds: looked up below its end; one it holds nothing of is not", async () => {
  const calls: string[] = [];
  const found = await findDelivered([0, 1], {
    topic: "cdr.raw",
    now: () => 5000,
    committed: async () => [
      { topic: "cdr.raw", partition: 0, offset: -1001n },
      { topic: "cdr.raw", partition: 1, offset: -1001n },
    ],
    lowWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    highWatermarks: async (ps) => new Map(ps.map((p) => [p, 300])),
    commit: async () => void calls.push("commit"),
    insertsEnded: async () => void calls.push("inserts ended"),
    anyStored: async (ranges) => (calls.push(`any ${JSON.stringify(ranges)}`), new Set([0])),
    stored: async () => (calls.push("stored"), new Map()),
    deadLettered: async () => (calls.push("dead-lettered"), { offsets: new Map(), digests: new Map() }),
  });
  expect(calls).toEqual(["commit", "inserts ended", `any ${JSON.stringify([{ partition: 0, from: 0, to: 300 }, { partition: 1, from: 0, to: 300 }])}`]);
  expect([...found].map(([p, s]) => [p, s.unsureBelow, s.offsets.size])).toEqual([[0, 300, 0], [1, undefined, 0]]);
});

test("a partition with no commit while ClickHouse does not answer goes on as a first owner's does: the check is not held", async () => {
  const found = await findDelivered([0], {
    topic: "cdr.raw",
    now: () => 5000,
    committed: async () => [{ topic: "cdr.raw", partition: 0, offset: -1001n }],
    lowWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
    highWatermarks: async (ps) => new Map(ps.map((p) => [p, 50])),
    commit: async () => {},
    insertsEnded: async () => {
      throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8123"), { code: "ECONNREFUSED" });
    },
    anyStored: async () => new Set(),
    stored: async () => new Map(),
    deadLettered: async () => ({ offsets: new Map(), digests: new Map() }),
  });
  expect(found.get(0)!.unsureBelow).toBeUndefined();
  expect(found.get(0)!.committed).toBe(0);
});
