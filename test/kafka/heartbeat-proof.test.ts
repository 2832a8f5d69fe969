// heartbeat-proof.ts on statistics of the test's own: a pure unit test. test/kafka/heartbeat-facts.test.ts
// has librdkafka write them, answer by answer, on its mock cluster; test/sim/fidelity.test.ts reads them
// from a member the test cuts off from the broker.
import { expect, setDefaultTimeout, test } from "bun:test";
import { standingOf } from "../../src/kafka/heartbeat-proof.ts";

setDefaultTimeout(60_000);

/** librdkafka's statistics with the patch's facts (µs on its clock), the rest as a real sample has it. */
function stats(hb: { accepted?: number; refused?: number; err?: number; rebalance?: number }) {
  return {
    ts: 9_000_000,
    cgrp: {
      state: "up",
      stateage: 4_000,
      join_state: "steady",
      rebalance_age: 3_000,
      rebalance_cnt: 1,
      assignment_size: 2,
      hb_accepted_ts: hb.accepted ?? 0,
      hb_ok_ts: hb.accepted ?? 0,
      hb_refused_ts: hb.refused ?? 0,
      hb_refused_err: hb.err ?? 0,
      hb_rebalance_ts: hb.rebalance ?? 0,
    },
  };
}
const toMono = (us: number) => us / 1_000 + 100;

test("the last answer accepted: a standing from its send time, on the process's clock", () => {
  expect(standingOf(stats({ accepted: 5_000_000 }), toMono)).toEqual({ kind: "accepted", sentAfter: 5_100, rebalanceSince: null });
  // A refusal before it was answered by the later accepted heartbeat.
  expect(standingOf(stats({ accepted: 5_000_000, refused: 4_000_000, err: 25 }), toMono)?.kind).toBe("accepted");
  expect(standingOf(stats({ accepted: 5_000_000, rebalance: 3_000_000 }), toMono)).toEqual({
    kind: "accepted",
    sentAfter: 5_100,
    rebalanceSince: 3_100,
  });
});

test("the last answer an error: refused, whatever was accepted before; the same request refused then accepted is refused", () => {
  expect(standingOf(stats({ accepted: 5_000_000, refused: 6_000_000, err: 110 }), toMono)).toEqual({ kind: "refused", err: 110 });
  expect(standingOf(stats({ refused: 6_000_000, err: -185 }), toMono)).toEqual({ kind: "refused", err: -185 });
  expect(standingOf(stats({ accepted: 6_000_000, refused: 6_000_000, err: 25 }), toMono)?.kind).toBe("refused");
});

test("no heartbeat answered yet, or facts that do not read: no standing; a group without any fact: a library without the patch", () => {
  expect(standingOf(stats({}), toMono)).toBeNull();
  expect(standingOf({ cgrp: { state: "up", join_state: "steady" } }, toMono)).toEqual({ kind: "unpatched" });
  const without = stats({ accepted: 5_000_000 }) as { cgrp: Record<string, unknown> };
  delete without.cgrp.hb_refused_ts;
  expect(standingOf(without, toMono)).toBeNull();
  for (const bad of [null, [], "x", 3, {}, { cgrp: null }, { cgrp: { hb_accepted_ts: "5" } }])
    expect(standingOf(bad, toMono)).toBeNull();
  const nan = stats({ accepted: 5_000_000 });
  nan.cgrp.hb_rebalance_ts = Number.NaN;
  expect(standingOf(nan, toMono)).toBeNull();
});
