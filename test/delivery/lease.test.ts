// The freeze detector with real clocks: a synchronous block stands in for a frozen process (the
// e2e test test/e2e/zombie.test.ts freezes a real worker with SIGSTOP).
import { expect, setDefaultTimeout, test } from "bun:test";
import { Lease } from "../../src/delivery/lease.ts";

setDefaultTimeout(60_000);

test("no gap: sends go at once", async () => {
  const events: string[] = [];
  const lease = new Lease(200, { onHold: () => events.push("hold"), onClear: () => events.push("clear") }, 300);
  expect(lease.look()).toBe(false);
  await lease.clear();
  expect(events).toEqual([]);
});

test("a gap longer than the threshold holds sends for the verdict window, then lets them go", async () => {
  const events: string[] = [];
  // A verdict window shorter than the threshold, as the worker's (3 s against half the session).
  const lease = new Lease(400, { onHold: () => events.push("hold"), onClear: () => events.push("clear") }, 300);
  expect(lease.look()).toBe(false);
  Bun.sleepSync(600); // frozen: no timer, no look, for longer than the threshold
  const seen = performance.now();
  expect(lease.look()).toBe(true);
  expect(events).toEqual(["hold"]);
  await lease.clear();
  expect(performance.now() - seen).toBeGreaterThanOrEqual(250);
  expect(events).toEqual(["hold", "clear"]);
  expect(lease.look()).toBe(false);
});

// The worker's start may wait for the brokers (a transactional producer's init) before its loop first
// looks: that wait is no freeze, and held every send 3 s once the loop began.
test("the first look starts the watch: the time before it is no gap", () => {
  const events: string[] = [];
  const lease = new Lease(100, { onHold: () => events.push("hold"), onClear: () => events.push("clear") }, 100);
  Bun.sleepSync(300);
  expect(lease.look()).toBe(false);
  expect(events).toEqual([]);
});

test("no timer of its own: a lease nobody looks at never calls back, however long it is left", async () => {
  const events: string[] = [];
  new Lease(50, { onHold: () => events.push("hold"), onClear: () => events.push("clear") }, 50);
  Bun.sleepSync(150);
  // Timers due by now have run once this yields; none is the lease's.
  await new Promise((r) => setTimeout(r, 20));
  expect(events).toEqual([]);
});
