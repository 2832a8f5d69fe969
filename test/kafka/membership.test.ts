// membership.ts on a clock of the test's own: a pure unit test. The simulation (test/sim/) runs it
// inside delivery against a group whose sessions end by the heartbeats the coordinator received.
import { expect, setDefaultTimeout, test } from "bun:test";
import type { Clock } from "../../src/time/clock.ts";
import { leaseLength, MembershipLease } from "../../src/kafka/membership.ts";

setDefaultTimeout(60_000);

/** A clock that moves only when told to. */
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

const TERMS = { sessionTimeoutMs: 45_000, rebalanceTimeoutMs: 300_000 };
const accepted = (sentAfter: number, rebalanceSince: number | null = null) => ({ kind: "accepted" as const, sentAfter, rebalanceSince });

/** Whether `p` has settled once pending callbacks ran. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

test("the lease is the session less a margin of a tenth of the session, at least 2 s", () => {
  expect(leaseLength(TERMS)).toBe(45_000 - 4_500);
  expect(leaseLength({ ...TERMS, sessionTimeoutMs: 10_000 })).toBe(8_000);
  expect(leaseLength({ ...TERMS, sessionTimeoutMs: 2_000 })).toBe(0);
});

test("a heartbeat accepted holds the lease from the instant it was sent; past it, a send waits for a newer one", async () => {
  const { clock, advance } = manualClock();
  const lease = new MembershipLease(TERMS, clock);
  expect(lease.held).toBe(false); // nothing proven yet
  lease.stand(accepted(0));
  advance(leaseLength(TERMS) - 1);
  expect([lease.held, lease.until]).toEqual([true, leaseLength(TERMS)]);
  expect(await settled(lease.hold(new AbortController().signal))).toBe(true);
  advance(1);
  expect(lease.held).toBe(false);
  const send = lease.hold(new AbortController().signal);
  expect(await settled(send)).toBe(false);
  // A proof that is already past holds nothing: the send still waits.
  lease.stand(accepted(-1));
  expect(await settled(send)).toBe(false);
  lease.stand(accepted(clock.mono() - 1_000));
  expect(await settled(send)).toBe(true);
});

test("a refusal ends the lease at once, whatever was accepted before; only a later acceptance renews it", async () => {
  const { clock, advance } = manualClock();
  const lease = new MembershipLease(TERMS, clock);
  lease.stand(accepted(0));
  advance(1_000);
  expect(lease.held).toBe(true);
  lease.stand({ kind: "refused", err: 110 });
  expect(lease.held).toBe(false);
  const send = lease.hold(new AbortController().signal);
  expect(await settled(send)).toBe(false);
  lease.stand(accepted(clock.mono()));
  expect(await settled(send)).toBe(true);
});

test("in a rebalance the lease ends by the rebalance timeout from its start, if that comes before the session", () => {
  const { clock, advance } = manualClock();
  const terms = { sessionTimeoutMs: 45_000, rebalanceTimeoutMs: 20_000 };
  const lease = new MembershipLease(terms, clock);
  // Heartbeats go on being accepted; the rebalance began after the one sent at 0.
  lease.stand(accepted(15_000, 0));
  expect(lease.until).toBe(20_000 - 4_500);
  advance(15_499);
  expect(lease.held).toBe(true);
  advance(1);
  expect(lease.held).toBe(false);
  // Without a rebalance, the session alone.
  lease.stand(accepted(15_000));
  expect(lease.until).toBe(15_000 + leaseLength(terms));
});

test("a loss (the signal) ends the wait without a proof; every waiting send goes on one proof", async () => {
  const { clock } = manualClock();
  const lease = new MembershipLease(TERMS, clock);
  const lost = new AbortController();
  const cut = lease.hold(lost.signal);
  expect(await settled(cut)).toBe(false);
  lost.abort();
  expect(await settled(cut)).toBe(true);
  expect(lease.held).toBe(false);

  const signal = new AbortController().signal;
  const sends = [lease.hold(signal), lease.hold(signal), lease.hold(signal)];
  expect(await settled(Promise.all(sends).then(() => {}))).toBe(false);
  lease.stand(accepted(clock.mono()));
  expect(await settled(Promise.all(sends).then(() => {}))).toBe(true);
});

test("a session changed while the lease holds measures the last accepted heartbeat again: shorter at once, longer too", () => {
  const { clock, advance } = manualClock();
  const lease = new MembershipLease(TERMS, clock);
  lease.stand(accepted(0));
  advance(10_000);
  expect(lease.held).toBe(true);
  const short = { ...TERMS, sessionTimeoutMs: 9_000 };
  lease.setTerms(short);
  expect([lease.held, lease.until]).toEqual([false, leaseLength(short)]);
  lease.setTerms(TERMS);
  expect([lease.held, lease.until]).toEqual([true, leaseLength(TERMS)]);
  // A refusal is not undone by a change of terms.
  lease.stand({ kind: "refused", err: 25 });
  lease.setTerms(TERMS);
  expect(lease.held).toBe(false);
});
