import { expect, setDefaultTimeout, test } from "bun:test";
import { failures, reconcile } from "../../src/audit/reconcile.ts";

setDefaultTimeout(60_000);

async function* of(values: number[]): AsyncGenerator<number> {
  yield* values;
}

test("each record stands for one row or one envelope: a clean partition has no finding", async () => {
  const f = await reconcile(3, { from: 0, to: 6 }, of([0, 1, 2, 3, 4, 5]), of([0, 1, 3, 5]), of([2, 4]));
  expect(f).toMatchObject({ partition: 3, from: 0, to: 6, records: 6, stored: 4, dead_lettered: 2 });
  expect(failures(f)).toBe(0);
});

test("missing, stored twice, dead-lettered twice, both, and rows at offsets that hold no record are told apart", async () => {
  // 2 holds nothing (a transaction marker): not a gap. 4 is missing, 5 stored twice, 6 dead-lettered
  // twice, 7 both; rows at 2 (twice: one finding) and an envelope at 9 stand for no record.
  const f = await reconcile(0, { from: 0, to: 10 }, of([0, 1, 3, 4, 5, 6, 7, 8]), of([0, 1, 2, 2, 3, 5, 5, 7, 8]), of([6, 6, 7, 9]));
  expect({ missing: f.missing, stored_twice: f.stored_twice, dead_lettered_twice: f.dead_lettered_twice, both: f.stored_and_dead_lettered, stray: f.not_a_record }).toEqual({
    missing: 1, stored_twice: 1, dead_lettered_twice: 1, both: 1, stray: 2,
  });
  expect(f.samples).toEqual({ missing: [4], stored_twice: [5], dead_lettered_twice: [6], stored_and_dead_lettered: [7], not_a_record: [2, 9] });
  expect(failures(f)).toBe(6);
});

test("samples keep the first ten offsets of a finding; the count keeps them all", async () => {
  const records = Array.from({ length: 100 }, (_, i) => i);
  const f = await reconcile(0, { from: 0, to: 100 }, of(records), of(records.filter((o) => o % 2 === 0)), of([]));
  expect(f.missing).toBe(50);
  expect(f.samples.missing).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
});
