import { expect, setDefaultTimeout, test } from "bun:test";
import { Waker } from "../../src/worker/wake.ts";

setDefaultTimeout(60_000);

test("a sleep ends at wake(), long before its deadline; a race ends at wake() or at the other promise", async () => {
  const w = new Waker();
  const t0 = performance.now();
  const sleeping = w.sleep(60_000);
  w.wake();
  await sleeping;
  expect(performance.now() - t0).toBeLessThan(1000);
  const racing = w.race(new Promise(() => {}));
  w.wake();
  await racing;
  let settle!: () => void;
  await Promise.all([w.race(new Promise<void>((r) => (settle = r))), Promise.resolve().then(() => settle())]);
  w.wake(); // nothing waits: no effect
});
