// storeBatch against a fake ClickHouse that refuses chosen rows (a pure unit test of the isolation;
// test/e2e/refused-rows.test.ts runs the same against the real server).
import { expect, setDefaultTimeout, test } from "bun:test";
import { parseError } from "@clickhouse/client";
import { ClickHouseInsertError, classifyInsertError } from "../../src/clickhouse/insert-error.ts";
import { MAX_ISOLATED, storeBatch, SystematicRefusalError, type InsertRange } from "../../src/clickhouse/store.ts";

setDefaultTimeout(60_000);

const policy = { maxAttempts: 3, initialDelayMs: 1, backoffFactor: 2 };
const noSleep = { sleep: async () => {} };
const dataError = (row: number | null) => new ClickHouseInsertError("Cannot parse", "data", { code: 27, row, column: "session_start_time" });

/** A fake server: refuses any range holding a bad row; reports the first one's row when `hints`. */
function fakeServer(bad: Set<number>, opts: { hints?: boolean; hintOffset?: number } = {}) {
  const stored: number[] = [];
  let inserts = 0;
  const insert: InsertRange = async (lo, hi) => {
    inserts++;
    for (let i = lo; i < hi; i++) {
      if (bad.has(i)) throw dataError(opts.hints ? i - lo + 1 + (opts.hintOffset ?? 0) : null);
    }
    for (let i = lo; i < hi; i++) stored.push(i);
  };
  return { insert, stored, inserts: () => inserts };
}

test.each([
  ["with ClickHouse's row number", true, 0],
  ["by bisection (no row number)", false, 0],
  ["with a wrong row number", true, 7],
])("one refused row in a full batch of 1000 %s: only it is refused, every other row inserted once", async (_n, hints, hintOffset) => {
  const server = fakeServer(new Set([613]), { hints, hintOffset });
  const out = await storeBatch(1000, server.insert, policy, noSleep);
  expect(out.refused.map((r) => r.row)).toEqual([613]);
  expect(out.refused[0]!.error.column).toBe("session_start_time");
  expect(out.failed).toBeNull();
  expect(out.inserted).toBe(999);
  expect(server.stored.sort((a, b) => a - b)).toEqual([...Array(1000).keys()].filter((i) => i !== 613));
  // A wrong hint costs its three inserts, then bisection takes over.
  expect(server.inserts()).toBeLessThanOrEqual(1 + (hintOffset ? 3 : 0) + 2 * Math.ceil(Math.log2(1000)) + 2);
});

test("several refused rows are isolated, in row order, each within the per-row bound", async () => {
  const bad = new Set([0, 1, 500, 998, 999]);
  const server = fakeServer(bad, { hints: true });
  const out = await storeBatch(1000, server.insert, policy, noSleep);
  expect(out.refused.map((r) => r.row)).toEqual([0, 1, 500, 998, 999]);
  expect(out.inserted).toBe(995);
  expect(new Set(server.stored).size).toBe(995);
  expect(server.inserts()).toBeLessThanOrEqual(1 + bad.size * (2 * Math.ceil(Math.log2(1000)) + 2));
});

test("a batch ClickHouse refuses whole for its shape is split until accepted, nothing refused", async () => {
  // Refuses any insert of more than 100 rows, as too many partitions in one block would.
  const stored: number[] = [];
  const insert: InsertRange = async (lo, hi) => {
    if (hi - lo > 100) throw new ClickHouseInsertError("Too many partitions", "shape", { code: 252 });
    for (let i = lo; i < hi; i++) stored.push(i);
  };
  const out = await storeBatch(1000, insert, policy, noSleep);
  expect(out.refused).toEqual([]);
  expect(out.failed).toBeNull();
  expect(stored.length).toBe(1000);
  expect(out.splitInserts).toBeGreaterThan(0);
});

test("an insert over the server's memory limit is split down to rows that fit; a row too large alone is refused and goes to the DLQ whole", async () => {
  // Sizes in bytes; the server refuses any insert over 5000 bytes (MEMORY_LIMIT_EXCEEDED, a shape error).
  const sizes = Array.from({ length: 40 }, (_, i) => (i === 17 ? 9000 : 400));
  const stored: number[] = [];
  const insert: InsertRange = async (lo, hi) => {
    let bytes = 0;
    for (let i = lo; i < hi; i++) bytes += sizes[i]!;
    if (bytes > 5000) throw new ClickHouseInsertError("Memory limit (for query) exceeded", "shape", { code: 241 });
    for (let i = lo; i < hi; i++) stored.push(i);
  };
  const out = await storeBatch(40, insert, policy, noSleep);
  expect(out.refused.map((r) => r.row)).toEqual([17]);
  expect(out.failed).toBeNull();
  expect(stored.sort((a, b) => a - b)).toEqual(sizes.map((_, i) => i).filter((i) => i !== 17));
});

test.each([
  ["18.16", "Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded: would use 1.02 GiB, maximum: 1.00 GiB, e.what() = DB::Exception\n"],
  ["current", "Code: 241. DB::Exception: (total) memory limit exceeded: would use 3.73 GiB, maximum: 3.72 GiB. (MEMORY_LIMIT_EXCEEDED) (version 26.9.2.1)\n"],
])("a server short of memory as a whole (%s) for two attempts: the batch is retried whole, never split, every row stored", async (_n, body) => {
  let calls = 0;
  const stored: number[] = [];
  const insert: InsertRange = async (lo, hi) => {
    if (++calls <= 2) throw classifyInsertError(parseError(body), `insert of ${hi - lo} rows`);
    for (let i = lo; i < hi; i++) stored.push(i);
  };
  const out = await storeBatch(1000, insert, policy, noSleep);
  expect(calls).toBe(3);
  expect(out.splitInserts).toBe(0);
  expect(out.refused).toEqual([]);
  expect(out.failed).toBeNull();
  expect(stored.length).toBe(1000);
});

test("transient errors are retried with backoff, and exhausted retries send the whole batch the spec's way", async () => {
  let calls = 0;
  const delays: number[] = [];
  const out = await storeBatch(10, async () => { calls++; throw new ClickHouseInsertError("ECONNREFUSED", "transient"); }, policy, { sleep: async (ms) => { delays.push(ms); } });
  expect(calls).toBe(3);
  expect(delays).toEqual([1, 2]);
  expect(out.failed?.ranges).toEqual([[0, 10]]);
  expect(out.failed?.attempts).toBe(3);
  expect(out.inserted).toBe(0);
});

test("a refusal of the worker (the table gone) is retried whole, never split: the budget's 3 attempts, then the spec's way", async () => {
  const sizes: number[] = [];
  const out = await storeBatch(10, async (lo, hi) => { sizes.push(hi - lo); throw new ClickHouseInsertError("Unknown table", "configuration", { code: 60 }); }, policy, noSleep);
  expect(sizes).toEqual([10, 10, 10]);
  expect(out.failed).toEqual({ ranges: [[0, 10]], error: expect.any(ClickHouseInsertError), attempts: 3 });
  expect(out.refused).toEqual([]);
});

test("every row refused alike (a column retyped) is systematic: nothing refused alone, the budget spent on one row, then the whole batch the spec's way", async () => {
  let calls = 0;
  const out = await storeBatch(1024, async () => { calls++; throw dataError(null); }, policy, noSleep);
  expect(out.inserted).toBe(0);
  expect(out.refused).toEqual([]);
  expect(out.failed?.ranges).toEqual([[0, 1024]]);
  expect(out.failed?.attempts).toBe(3);
  expect(out.failed?.error).toBeInstanceOf(SystematicRefusalError);
  // The bound stops the search long before 2n inserts; then two more attempts of one row.
  expect(calls).toBeLessThanOrEqual(1 + MAX_ISOLATED * (2 * 10 + 2) + 2);
});

test("under the wait policy a systematic refusal waits without spending the budget, and once undone the batch is stored, its one bad row refused alone", async () => {
  let retyped = true;
  let probes = 0;
  const bad = 700;
  const stored = new Set<number>();
  const waits: boolean[] = [];
  const insert: InsertRange = async (lo, hi) => {
    if (retyped) {
      // Row 0 is the first refused alone, then the probe: undone while its sixth try waits.
      if (lo === 0 && hi === 1 && ++probes === 6) retyped = false;
      throw dataError(null);
    }
    if (lo <= bad && bad < hi) throw dataError(bad - lo + 1);
    for (let i = lo; i < hi; i++) stored.add(i);
  };
  const out = await storeBatch(1000, insert, { ...policy, whenUnreachable: "wait" }, { ...noSleep, onWaiting: (w) => waits.push(w) });
  expect(out.failed).toBeNull();
  expect(out.refused.map((r) => r.row)).toEqual([bad]);
  expect(out.inserted).toBe(999);
  expect(stored.size).toBe(999);
  expect(waits).toEqual([true, false]);
});
