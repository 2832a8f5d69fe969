import { expect, setDefaultTimeout, test } from "bun:test";
import { Pending } from "../../src/delivery/pending.ts";

setDefaultTimeout(60_000);

test("pending work: each settling wakes the loop, a failure is reported, any() resolves on the first to settle", async () => {
  const errors: unknown[] = [];
  let wakes = 0;
  const pending = new Pending((e) => errors.push(e), () => wakes++);
  await pending.any(); // nothing pending: at once
  let finish!: () => void;
  pending.add(new Promise<void>((r) => (finish = r)));
  pending.add(Promise.reject(new Error("DLQ down")));
  expect(pending.size).toBe(2);
  await pending.any();
  expect(errors.map((e) => (e as Error).message)).toEqual(["DLQ down"]);
  expect([pending.size, wakes]).toEqual([1, 1]);
  finish();
  await pending.any();
  expect([pending.size, wakes, errors.length]).toEqual([0, 2, 1]);
});
