// The stall the protocol table reports (test/support/scenario-meter.ts): the longest span in which
// the table's count did not grow while rows were still to come.
import { expect, setDefaultTimeout, test } from "bun:test";
import { longestStallMs } from "../support/scenario-meter.ts";

setDefaultTimeout(60_000);

const at = (pairs: Array<[number, number]>) => pairs.map(([t, rows]) => ({ at: t, rows }));

test("the longest span without growth below the final count; a flat end at the final count is no stall", () => {
  const samples = at([[0, 0], [1000, 100], [2000, 100], [5000, 100], [5500, 300], [6000, 400], [9000, 400]]);
  expect(longestStallMs(samples, 400)).toBe(4000); // 100 rows from 1 s to 5.5 s, seen flat until 5 s
  expect(longestStallMs(samples, 500)).toBe(4000);
  expect(longestStallMs(at([[0, 5], [3000, 5]]), 10)).toBe(3000);
  expect(longestStallMs([], 10)).toBe(0);
});
