// insert-once.ts with a stand-in writer (a pure unit test; test/e2e/lost-answers.test.ts runs it
// against both real servers behind a proxy that loses answers).
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../../src/cdr/phone.ts";
import { ClickHouseInsertError, HeldCheckError } from "../../../src/clickhouse/insert-error.ts";
import { storeBatch } from "../../../src/clickhouse/store.ts";
import { RowBuffer } from "../../../src/clickhouse/row-encoder.ts";
import type { ClickHouseWriter } from "../../../src/clickhouse/writer.ts";
import { storedRowKey, type RowLookup } from "../../../src/clickhouse/row-lookup.ts";
import { Batch } from "../../../src/delivery/batch/batch.ts";
import { insertOnce } from "../../../src/delivery/flush/insert-once.ts";
import { setLogSink } from "../../../src/log.ts";
import { toJson, withFields } from "../../fixtures/records.ts";

setDefaultTimeout(60_000);

function batchOf(n: number): Batch {
  const b = new Batch(n, new RowBuffer());
  const ctx = { phone: new PhoneNormalizer() };
  for (let i = 0; i < n; i++) {
    const d = decode(toJson(withFields({ raw_id: `r${i}` })), ctx);
    if (!d.ok) throw new Error("fixture must be valid");
    b.add(d.row, 1_700_000_000, d.payload, 0, i, -1);
  }
  return b;
}

/** What the server answers for the row at each offset of a batch: its provenance, cdr_id and second. */
function keysOf(b: Batch): Map<number, string> {
  const m = new Map<number, string>();
  for (let i = 0; i < b.count; i++) m.set(b.offsets[i]!, storedRowKey(0, b.offsets[i]!, b.cdrId(i), b.sessionStarts[i]!));
  return m;
}

const lost = (code: string) =>
  Object.assign(new ClickHouseInsertError("insert: lost", "transient", { code: null }, { cause: Object.assign(new Error(code), { code }), mayHaveStored: true }), {
    attempts: [{ endpoint: 0, queryId: "q" }],
  });

/** A server that stores what it is sent; `lose` says which sends store but lose their answer. */
function writer(lose: (send: number) => boolean, checkFails = () => false, keys = keysOf(batchOf(64))) {
  const rows: number[] = [];
  const seen: RowLookup[] = [];
  const sends: number[] = [];
  const w = {
    insert: async (_body: Uint8Array, n: number) => {
      sends.push(n);
      const first = rows.length;
      for (let k = 0; k < n; k++) rows.push(first + k); // the test batches send rows in order
      if (lose(sends.length)) throw lost("ETIMEDOUT");
    },
    endInserts: async () => {
      if (checkFails()) throw new Error("no answer");
    },
    storedRows: async (l: RowLookup) => {
      seen.push(l);
      return new Set(rows.filter((o) => o >= l.minOffset && o <= l.maxOffset).map((o) => keys.get(o)!));
    },
  };
  return { w: w as unknown as ClickHouseWriter, rows, sends, seen };
}

test("an answer lost after the server stored every row: checked, nothing sent again", async () => {
  const b = batchOf(10);
  const f = writer((k) => k === 1);
  const once = insertOnce(b, f.w);
  await expect(once.insert(0, 10)).rejects.toBeInstanceOf(ClickHouseInsertError); // ETIMEDOUT: the retry's delay
  await once.insert(0, 10);
  expect(f.sends).toEqual([10]);
  expect(f.rows.length).toBe(10);
  expect([once.lost, once.foundStored]).toEqual([1, 10]);
});

test("a reset is checked and the rows not stored are sent at once; stored rows are never sent twice", async () => {
  const b = batchOf(10);
  // The server stored the first 10 of a send whose answer was reset: all stored, done without a resend.
  const f = writer(() => false);
  f.w.insert = (async (_body: Uint8Array, n: number) => {
    f.sends.push(n);
    if (f.sends.length === 1) {
      for (let k = 0; k < 4; k++) f.rows.push(k); // stored only 4 rows, then the connection reset
      throw lost("ECONNRESET");
    }
    for (let k = 0; k < n; k++) f.rows.push(f.rows.length);
  }) as ClickHouseWriter["insert"];
  const once = insertOnce(b, f.w);
  await once.insert(0, 10);
  expect(f.sends).toEqual([10, 6]);
  expect(new Set(f.rows).size).toBe(f.rows.length);
  expect(once.stored(3) && !once.stored(4)).toBe(true);
});

test("a check that cannot run leaves the rows unchecked: the next attempt checks before it sends", async () => {
  const b = batchOf(5);
  let down = true;
  const f = writer((k) => k === 1, () => down);
  const once = insertOnce(b, f.w);
  await expect(once.insert(0, 5)).rejects.toBeInstanceOf(ClickHouseInsertError);
  await expect(once.insert(0, 5)).rejects.toThrow("no answer");
  expect(f.sends).toEqual([5]);
  down = false;
  await once.insert(0, 5);
  expect(f.sends).toEqual([5]);
  expect(once.stored(4)).toBe(true);
});

// Under CH_UNREACHABLE_POLICY=wait the retry policy waits while nothing answers, spending no attempt.
// A check that cannot run because ClickHouse does not answer must say so: thrown as a plain error it
// was counted as an attempt, and three of them sent the batch to the DLQ while ClickHouse was away.
test("regression: a check ClickHouse does not answer fails as unreachable, so the wait policy waits instead of spending attempts", async () => {
  const { createClient } = await import("@clickhouse/client");
  const nobody = createClient({ url: "http://127.0.0.1:1", request_timeout: 2000 });
  const refused = await nobody.command({ query: "KILL QUERY WHERE 0 SYNC" }).then(() => null, (e: unknown) => e);
  await nobody.close();
  expect(refused).toBeInstanceOf(Error);
  const b = batchOf(3);
  const f = writer((k) => k === 1, () => false);
  f.w.endInserts = (async () => {
    throw refused;
  }) as ClickHouseWriter["endInserts"];
  const once = insertOnce(b, f.w);
  await expect(once.insert(0, 3)).rejects.toBeInstanceOf(ClickHouseInsertError);
  const err = await once.insert(0, 3).then(() => null, (e: unknown) => e as ClickHouseInsertError);
  expect(err).toBeInstanceOf(ClickHouseInsertError);
  expect([err!.unreachable, err!.retryable, err!.mayHaveStored]).toEqual([true, true, true]);
  expect(f.sends).toEqual([3]); // nothing sent again while what was stored is unknown
});

// One endpoint of two was stopped while it took an insert, and the answer was lost: only it can say
// what it stored. Its check failed as any other, the spec's three attempts ran out within 1.5 s, and
// 1000 valid records went to the DLQ while the other endpoint answered (the cluster's replica fault).
test("regression: a check held by the silent endpoint that took the insert, while another answers, spends no attempt; the rows are stored when it is back", async () => {
  const b = batchOf(4);
  let silentFor = 5; // the checks the endpoint holds before it answers again
  const f = writer((k) => k === 1);
  f.w.endInserts = (async () => {
    if (silentFor-- > 0) throw new HeldCheckError("r1", 120_000, Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
  }) as ClickHouseWriter["endInserts"];
  const once = insertOnce(b, f.w);
  const slept: number[] = [];
  const policy = { maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2, whenUnreachable: "dlq" as const };
  const out = await storeBatch(b.count, once.insert, policy, { sleep: async (ms) => void slept.push(ms) });
  expect(out.failed).toBeNull();
  expect(out.inserted).toBe(4);
  expect(f.sends).toEqual([4]); // stored by the lost send, found by the check once the endpoint answered
  expect([once.lost, once.foundStored]).toEqual([1, 4]);
  // One delay for the lost answer's attempt, then five held checks that spent none: 7 tries in all.
  expect(slept).toEqual([500, 500, 1000, 2000, 4000, 5000]);
});

// The lookup reads the table at the rows' own session_start_time seconds: with one row of epoch 0 and
// one of now, a span from the first to the last was a read of the whole table, which timed out and
// was tried again for ever.
test("regression: the lookup names the rows' seconds, not the span between them; a row of another record at that offset is not this one", async () => {
  const ctx = { phone: new PhoneNormalizer() };
  const b = new Batch(3, new RowBuffer());
  for (const [i, start] of [[0, 0], [1, 1_700_000_000], [2, 1_700_000_000]] as const) {
    const d = decode(toJson(withFields({ raw_id: `e${i}`, epoch_start: start, epoch_end: start + 10 })), ctx);
    if (!d.ok) throw new Error("fixture must be valid");
    b.add(d.row, 1_700_000_000, d.payload, 0, i, -1);
  }
  const keys = keysOf(b);
  // Offset 2 holds a row of another record (an older life of the topic): not this row, so it is sent.
  keys.set(2, storedRowKey(0, 2, "00000000-0000-0000-0000-000000000000", 1_700_000_000));
  const f = writer((k) => k === 1, () => false, keys);
  const once = insertOnce(b, f.w);
  await expect(once.insert(0, 3)).rejects.toBeInstanceOf(ClickHouseInsertError);
  await once.insert(0, 3);
  expect(f.seen.map((l) => [...l.starts].sort((x, y) => x - y))).toEqual([[0, 1_700_000_000]]);
  expect([once.stored(0), once.stored(1), once.stored(2)]).toEqual([true, true, false]);
  expect(f.sends).toEqual([3, 1]);
});

test("rows a partition's last owner may have stored are looked up before their first send: only the rest go, and no answer counts as lost", async () => {
  const b = batchOf(6);
  for (const i of [0, 1, 2]) b.unsure[i] = 1;
  const f = writer(() => false);
  f.rows.push(0, 1); // the last owner stored offsets 0 and 1; 2 never reached ClickHouse
  const once = insertOnce(b, f.w);
  await once.insert(0, 6);
  expect(f.seen.map((l) => [l.minOffset, l.maxOffset])).toEqual([[0, 2]]);
  expect(f.sends).toEqual([4]);
  expect([once.stored(1), once.stored(2), once.lost, once.foundStored]).toEqual([true, false, 0, 2]);
});

// The spec's exhausted path can dead-letter rows that are stored after all, when no endpoint can say
// (docs/internals.md "Stored and dead-lettered"): the line that says so names them, so that an
// operator, and the delivery simulation's invariant, can tell which records it means.
test("rows that may be stored but cannot be read are named by partition and offsets: a lost answer's, and a last owner's", async () => {
  const ctx = { phone: new PhoneNormalizer() };
  const mixed = () => {
    const b = new Batch(5, new RowBuffer());
    for (const [i, [partition, offset]] of [[0, 10], [2, 5], [0, 12], [2, 6], [1, 40]].entries()) {
      const d = decode(toJson(withFields({ raw_id: `m${i}` })), ctx);
      if (!d.ok) throw new Error("fixture must be valid");
      b.add(d.row, 1_700_000_000, d.payload, partition!, offset!, -1);
    }
    return b;
  };
  const lines: Array<{ msg: string; rows: number; offsets: string[] }> = [];
  setLogSink((line) => void lines.push(JSON.parse(line)));
  try {
    // Its own insert stored every row and lost its answer; no read answers after it.
    const lostAnswer = insertOnce(mixed(), writer((k) => k === 1, () => true).w);
    await expect(lostAnswer.insert(0, 5)).rejects.toBeInstanceOf(ClickHouseInsertError);
    await expect(lostAnswer.insert(0, 5)).rejects.toBeInstanceOf(ClickHouseInsertError);
    await lostAnswer.settle();
    // Rows 1-3 are unsure at the hand-over (the offsets table lacked them); no read answers.
    const b = mixed();
    for (const i of [1, 2, 3]) b.unsure[i] = 1;
    const f = writer(() => false, () => true);
    const handOver = insertOnce(b, f.w);
    await expect(handOver.insert(0, 5)).rejects.toBeInstanceOf(ClickHouseInsertError);
    await handOver.settle();
    expect(f.sends).toEqual([]); // nothing was sent before the unsure rows were read
  } finally {
    setLogSink();
  }
  const unread = lines.filter((l) => l.msg.includes("cannot be read"));
  expect(unread.map((l) => [l.msg.split(";")[0], l.rows, l.offsets])).toEqual([
    ["a ClickHouse insert's answer was lost and what it stored cannot be read", 5, ["0:10-12", "1:40-40", "2:5-6"]],
    ["rows a partition's last owner may have stored cannot be read", 3, ["0:12-12", "2:5-6"]],
  ]);
  expect(unread.every((l) => l.msg.endsWith("they go to the DLQ and may also be stored") || l.msg.endsWith("its rows go to the DLQ and may also be stored"))).toBe(true);
});

// A batch's next send names the endpoints where its sends failed after they may have stored, so the
// writer tries the others first (writer.ts's order): the shared cursor alone can point it back at one.
test("a send after a lost answer names the endpoints the batch's sends failed at", async () => {
  const b = batchOf(4);
  const f = writer(() => false);
  const named: number[][] = [];
  f.w.insert = (async (_body: Uint8Array, n: number, _admit?: unknown, failed?: ReadonlySet<number>) => {
    named.push([...(failed ?? [])]);
    if (named.length === 1) throw lost("ETIMEDOUT"); // stored nothing; its answer lost at endpoint 0
    for (let k = 0; k < n; k++) f.rows.push(k);
  }) as typeof f.w.insert;
  const once = insertOnce(b, f.w);
  await expect(once.insert(0, 4)).rejects.toBeInstanceOf(ClickHouseInsertError);
  await once.insert(0, 4);
  expect(named).toEqual([[], [0]]);
  expect(f.rows.length).toBe(4);
});
