import { expect, setDefaultTimeout, test } from "bun:test";
import { InFlight } from "../../src/delivery/in-flight.ts";

setDefaultTimeout(60_000);

test("pending work: each settling wakes the loop, a failure is reported, any() resolves on the first to settle", async () => {
  const errors: unknown[] = [];
  let wakes = 0;
  const inFlight = new InFlight((e) => errors.push(e), () => wakes++);
  await inFlight.any(); // nothing pending: at once
  let finish!: () => void;
  inFlight.add(new Promise<void>((r) => (finish = r)));
  inFlight.add(Promise.reject(new Error("DLQ down")));
  expect(inFlight.size).toBe(2);
  await inFlight.any();
  expect(errors.map((e) => (e as Error).message)).toEqual(["DLQ down"]);
  expect([inFlight.size, wakes]).toEqual([1, 1]);
  finish();
  await inFlight.any();
  expect([inFlight.size, wakes, errors.length]).toEqual([0, 2, 1]);
});
