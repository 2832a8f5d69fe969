// membership.ts on a clock of the test's own: a pure unit test. The simulation (test/sim/) runs it
// inside delivery against a group whose sessions end by the heartbeats the coordinator received.
import { expect, setDefaultTimeout, test } from "bun:test";
import type { Clock } from "../../src/delivery/clock.ts";
import { leaseLength, MembershipLease } from "../../src/delivery/membership.ts";

/** A clock that moves only when told to, or when something sleeps on it. */
function manualClock() {
  let mono = 0;
  const clock: Clock = {
    now: () => 1_700_000_000_000 + mono,
    mono: () => mono,
    setTimeout: () => () => {},
    sleep: async (ms) => void (mono += ms),
    yield: async () => {},
  };
  return { clock, advance: (ms: number) => void (mono += ms) };
}

setDefaultTimeout(60_000);

const TERMS = { sessionTimeoutMs: 45_000, heartbeatIntervalMs: 3_000 };

test("the lease is the session less a heartbeat interval and a margin of a tenth of the session, at least 2 s", () => {
  expect(leaseLength(TERMS)).toBe(45_000 - 3_000 - 4_500);
  expect(leaseLength({ sessionTimeoutMs: 10_000, heartbeatIntervalMs: 1_000 })).toBe(7_000);
  expect(leaseLength({ sessionTimeoutMs: 3_000, heartbeatIntervalMs: 3_000 })).toBe(0);
});

test("a proof holds the lease from its send time; past it, a send waits for a renewal the coordinator accepted", async () => {
  const { clock, advance } = manualClock();
  let renewals = 0;
  const lease: MembershipLease = new MembershipLease(
    TERMS,
    async () => {
      renewals++;
      lease.proven(clock.mono());
      return true;
    },
    clock,
  );
  expect(lease.held).toBe(false); // nothing proven yet
  lease.proven(0);
  advance(leaseLength(TERMS) - 1);
  expect(lease.held).toBe(true);
  await lease.hold(new AbortController().signal);
  expect(renewals).toBe(0);
  advance(1);
  expect(lease.held).toBe(false);
  await lease.hold(new AbortController().signal);
  expect([renewals, lease.held]).toEqual([1, true]);
  // A proof older than the one held never shortens the lease.
  lease.proven(-100_000);
  expect(lease.held).toBe(true);
});

test("refused renewals are tried again until one is accepted; a loss (the signal) ends the wait without one", async () => {
  const { clock } = manualClock();
  let tries = 0;
  const lease: MembershipLease = new MembershipLease(
    TERMS,
    async () => {
      if (++tries < 3) return false; // refused: the group is rebalancing
      lease.proven(clock.mono());
      return true;
    },
    clock,
  );
  await lease.hold(new AbortController().signal);
  expect([tries, lease.held, clock.mono()]).toEqual([3, true, 1_000]);

  const cut = new MembershipLease(TERMS, async () => false, clock);
  const lost = new AbortController();
  let n = 0;
  const waiting = cut.hold(lost.signal);
  // Cut off from the coordinator: it renews in vain until the assignment is declared lost.
  for (; n < 20; n++) await clock.yield();
  lost.abort();
  await waiting;
  expect(cut.held).toBe(false);
});

test("concurrent sends share one renewal", async () => {
  const { clock } = manualClock();
  let renewals = 0;
  let accept!: () => void;
  const lease: MembershipLease = new MembershipLease(
    TERMS,
    () =>
      new Promise<boolean>((resolve) => {
        renewals++;
        accept = () => {
          lease.proven(clock.mono());
          resolve(true);
        };
      }),
    clock,
  );
  const signal = new AbortController().signal;
  const sends = [lease.hold(signal), lease.hold(signal), lease.hold(signal)];
  await clock.yield();
  accept();
  await Promise.all(sends);
  expect(renewals).toBe(1);
});
