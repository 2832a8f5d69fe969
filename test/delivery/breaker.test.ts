import { expect, setDefaultTimeout, test } from "bun:test";
import { DlqBreaker } from "../../src/delivery/breaker.ts";

setDefaultTimeout(60_000);

test("trips (true once) when the DLQ share of a full window exceeds the ratio, and stays tripped", () => {
  const b = new DlqBreaker(0.5, 4);
  expect([true, true, true].map((d) => b.record(d))).toEqual([false, false, false]); // window not full yet
  expect(b.record(true)).toBe(true);
  expect(b.tripped).toBe(true);
  expect(b.record(false)).toBe(false); // true only for the record that tripped it
  expect(b.tripped).toBe(true);
});

test("a share at the ratio does not trip; a ratio of 1 never does", () => {
  const b = new DlqBreaker(0.5, 4);
  for (const d of [true, false, true, false, true, false]) expect(b.record(d)).toBe(false);
  expect(b.ratio).toBe(0.5);
  const never = new DlqBreaker(1, 10);
  for (let i = 0; i < 100; i++) expect(never.record(true)).toBe(false);
});

test("the storage path counts too: a batch's rows, stored or dead-lettered, fill the same window", () => {
  const b = new DlqBreaker(0.5, 10);
  expect(b.recordMany(4, false)).toBe(false);
  expect(b.recordMany(6, true)).toBe(true);
  expect(b.ratio).toBe(0.6);
});

test("reset, the operator's word: the window starts empty and the breaker closed, and it can trip again", () => {
  const b = new DlqBreaker(0.5, 4);
  b.recordMany(4, true);
  expect(b.tripped).toBe(true);
  b.reset();
  expect([b.tripped, b.ratio]).toEqual([false, 0]);
  expect(b.recordMany(3, true)).toBe(false); // the window fills anew before it judges
  expect(b.record(true)).toBe(true);
});
