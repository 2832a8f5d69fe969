// trace's verdict from what it found (src/trace/verdict.ts), rule by rule; the real services in
// test/e2e/trace.test.ts.
import { expect, setDefaultTimeout, test } from "bun:test";
import { offsetVerdict, rawIdVerdict, type OffsetFacts } from "../../src/trace/verdict.ts";

setDefaultTimeout(60_000);

const stored = { partition: 0, offset: 5, cdr_id: "c", ingested_at: "2026-12-06 10:00:00" };
const dead = { dlq_partition: 0, dlq_offset: 9, failure_reason: "invalid_rat_value", failed_field: "rat", failed_at: "t", source_partition: 0, source_offset: 5 };
const at = (offset: number, change: Partial<OffsetFacts> = {}): OffsetFacts => ({
  offset, positions: { partition: 0, low: 10, high: 100, committed: 50 }, stored: [], deadLettered: [], readable: true, ...change,
});

test.each([
  ["stored", at(20, { stored: [stored] }), "stored"],
  ["dead-lettered, with its reason and field", at(20, { deadLettered: [dead] }), "dead_lettered"],
  ["both: a finding", at(20, { stored: [stored], deadLettered: [dead] }), "stored_and_dead_lettered"],
  ["stored, though below the log start now", at(5, { stored: [stored] }), "stored"],
  ["past the partition's end", at(100), "not_yet_written"],
  ["at the group's commit", at(50), "not_yet_consumed"],
  ["no commit yet", at(60, { positions: { partition: 0, low: 10, high: 100, committed: -1 } }), "not_yet_consumed"],
  ["below the log start, never stored: gone", at(5, { readable: null }), "gone"],
  ["below the log start with no commit: gone all the same", at(5, { readable: null, positions: { partition: 0, low: 10, high: 100, committed: -1 } }), "gone"],
  ["committed, no record there: a marker or an aborted record", at(20, { readable: false }), "not_a_record"],
  ["committed, a record, found nowhere: missing", at(20), "missing"],
] as const)("%s", (_name, facts, verdict) => {
  const v = offsetVerdict(facts);
  expect(v.verdict).toBe(verdict);
  expect(v.says).toContain(`offset ${facts.offset} of partition 0`);
});

test("a raw_id: stored, dead-lettered, or found nowhere with the records still waiting", () => {
  const positions = [{ partition: 0, low: 0, high: 10, committed: 7 }, { partition: 1, low: 4, high: 6, committed: -1 }];
  expect(rawIdVerdict("r", [stored], [], positions).verdict).toBe("stored");
  expect(rawIdVerdict("r", [], [dead], positions).says).toContain("DLQ partition 0 offset 9, invalid_rat_value (rat)");
  const nowhere = rawIdVerdict("r", [], [], positions);
  expect(nowhere.verdict).toBe("found_nowhere");
  expect(nowhere.says).toContain("(5 records wait)");
});

test("found in the DLQ topic past the DLQ table: dead-lettered, and said to be not in the table yet", () => {
  const v = offsetVerdict(at(20, { deadLettered: [dead], fromDlqTopic: true }));
  expect(v.verdict).toBe("dead_lettered");
  expect(v.says).toContain("the DLQ table does not hold it yet");
  const lost = offsetVerdict(at(20, { fromDlqTopic: true }));
  expect(lost.verdict).toBe("missing");
  expect(lost.says).toContain("the DLQ topic read too");
});
