// heartbeat-proof.ts on samples of the test's own: a pure unit test. test/sim/fidelity.test.ts reads
// librdkafka's own statistics from a member the test cuts off from the broker.
import { expect, setDefaultTimeout, test } from "bun:test";
import { coordinatorSample, HeartbeatProofs, type CoordinatorSample } from "../../src/kafka/heartbeat-proof.ts";

setDefaultTimeout(60_000);

/** One sample a second, the coordinator's connection idle at `at`, the group steady since long before. */
function sample(at: number, over: Partial<CoordinatorSample> & { rx?: number; heartbeats?: number } = {}): CoordinatorSample {
  const { rx = 10, heartbeats = 5, ...rest } = over;
  return {
    at,
    member: "m-1",
    group: { state: "up", stateAgeMs: 60_000 + at, joinState: "steady", rebalances: 1 },
    coordinator: { waitresp: 0, rx, rxcorriderrs: 0, requests: { Heartbeat: heartbeats, OffsetFetch: 1, JoinGroup: 1 } },
    findCoordinator: 2,
    ...rest,
  };
}

/** What three samples prove. */
function proof(a: CoordinatorSample, b: CoordinatorSample, c: CoordinatorSample): number | null {
  const p = new HeartbeatProofs();
  p.take(a);
  p.take(b);
  return p.take(c);
}

function proof4(...samples: CoordinatorSample[]): number | null {
  const p = new HeartbeatProofs();
  let out: number | null = null;
  for (const s of samples) out = p.take(s);
  return out;
}

const A = sample(1_000);
const B = sample(2_000, { rx: 11, heartbeats: 6 });
const C = sample(3_000, { rx: 11, heartbeats: 6 });

test("a heartbeat sent after an idle sample and answered by the next, the group steady to the third: proven from the first", () => {
  expect(proof(A, B, C)).toBe(1_000);
  // KIP-848's ConsumerGroupHeartbeat is not among the counted types: an answer with none counted is one.
  expect(proof(A, sample(2_000, { rx: 11 }), sample(3_000, { rx: 11 }))).toBe(1_000);
  // A heartbeat on its way at a sample: the proof goes back to the idle sample before it.
  const busy = (s: CoordinatorSample) => ({ ...s, coordinator: { ...s.coordinator!, waitresp: 1 } });
  expect(proof4(A, busy(sample(1_700, { heartbeats: 6 })), sample(2_400, { rx: 11, heartbeats: 6 }), sample(3_100, { rx: 11, heartbeats: 6 }))).toBe(1_000);
  expect(proof4(busy(A), busy(B), C, C)).toBeNull();
  // A sliding window: each sample after the third may complete a proof of its own.
  const p = new HeartbeatProofs();
  for (const s of [A, B, C, sample(4_000, { rx: 12, heartbeats: 7 })]) p.take(s);
  expect(p.take(sample(5_000, { rx: 12, heartbeats: 7 }))).toBe(3_000);
});

test("no proof when the answer may belong to another request, or the group may have refused it", () => {
  const coordinator = A.coordinator!;
  const cases: Array<[string, CoordinatorSample, CoordinatorSample, CoordinatorSample]> = [
    ["a request awaited an answer at the first sample", { ...A, coordinator: { ...coordinator, waitresp: 1 } }, B, C],
    ["no answer by the second", A, sample(2_000, { heartbeats: 6 }), C],
    ["the answer matched no request (one that timed out)", A, { ...B, coordinator: { ...B.coordinator!, rxcorriderrs: 1 } }, C],
    ["another request type went out", A, { ...B, coordinator: { ...B.coordinator!, requests: { Heartbeat: 6, OffsetFetch: 2, JoinGroup: 1 } } }, C],
    ["a type counted first at the second", A, { ...B, coordinator: { ...B.coordinator!, requests: { ...B.coordinator!.requests, SyncGroup: 1 } } }, C],
    ["no coordinator connection", { ...A, coordinator: null }, B, C],
    ["the member id changed", A, B, { ...C, member: "m-2" }],
    ["no member id", { ...A, member: "" }, { ...B, member: "" }, { ...C, member: "" }],
    ["a rebalance began", A, B, { ...C, group: { ...C.group, rebalances: 2 } }],
    ["the coordinator was asked for anew", A, B, { ...C, findCoordinator: 3 }],
    ["the group left `up` in between", A, B, { ...C, group: { ...C.group, stateAgeMs: 1_500 } }],
    ["the group is not up", A, B, { ...C, group: { ...C.group, state: "wait-coord" } }],
    ["the member is joining", A, B, { ...C, group: { ...C.group, joinState: "wait-join" } }],
    ["the join state moved", A, B, { ...C, group: { ...C.group, joinState: "wait-unassign-call" } }],
  ];
  for (const [why, a, b, c] of cases) expect({ why, proof: proof(a, b, c) }).toEqual({ why, proof: null });
  // While a revocation settles, librdkafka still heartbeats, and an accepted answer still proves.
  const revoking = (s: CoordinatorSample) => ({ ...s, group: { ...s.group, joinState: "wait-unassign-call" } });
  expect(proof(revoking(A), revoking(B), revoking(C))).toBe(1_000);
});

/** Statistics as librdkafka 2.15 writes them (STATISTICS.md), reduced to what a sample reads. */
function statsJson(over: { waitresp?: number; member?: boolean } = {}) {
  const broker = (name: string, source: string, req: Record<string, number>) => ({
    name, nodeid: source === "logical" ? -1 : 1, source, state: "UP", waitresp_cnt: over.waitresp ?? 0, rx: 7, rxcorriderrs: 0, rxidle: 5, req,
  });
  return JSON.stringify({
    ts: 5_000_000,
    brokers: {
      "localhost:9092/1": broker("localhost:9092/1", "learned", { FindCoordinator: 2, Fetch: 100, Heartbeat: 0 }),
      "GroupCoordinator": broker("GroupCoordinator", "logical", { FindCoordinator: 0, Heartbeat: 4, JoinGroup: 1 }),
    },
    cgrp: { state: "up", stateage: 4_000, join_state: "steady", rebalance_age: 3_000, rebalance_cnt: 1, assignment_size: 2 },
  });
}

test("a sample reads the logical GroupCoordinator's counters, FindCoordinator on every broker, the group's state, on the process's clock", () => {
  expect(coordinatorSample(statsJson(), "m-1", (us) => us / 1_000 + 100)).toEqual({
    at: 5_100,
    member: "m-1",
    group: { state: "up", stateAgeMs: 4_000, joinState: "steady", rebalances: 1 },
    coordinator: { waitresp: 0, rx: 7, rxcorriderrs: 0, requests: { FindCoordinator: 0, Heartbeat: 4, JoinGroup: 1 } },
    findCoordinator: 2,
  });
});

test("statistics that lack what a proof needs give no sample, and no byte string throws", () => {
  const parsed = JSON.parse(statsJson());
  const without = (f: (s: typeof parsed) => void) => {
    const s = structuredClone(parsed);
    f(s);
    return JSON.stringify(s);
  };
  for (const json of [
    "",
    "{",
    "null",
    "[]",
    without((s) => delete s.cgrp),
    without((s) => delete s.ts),
    without((s) => (s.cgrp.rebalance_cnt = "1")),
    without((s) => (s.brokers.GroupCoordinator.req.Heartbeat = null)),
    without((s) => delete s.brokers.GroupCoordinator.waitresp_cnt),
  ])
    expect(coordinatorSample(json, "m", (us) => us)).toBeNull();
  // Without a coordinator connection yet: a sample, with nothing to prove from.
  expect(coordinatorSample(without((s) => delete s.brokers.GroupCoordinator), "m", (us) => us)?.coordinator).toBeNull();
  // Random cuts and byte flips of a real-shaped sample: a sample or null, never an exception.
  const text = statsJson();
  let seed = 7;
  const rand = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
  for (let i = 0; i < 2_000; i++) {
    const at = rand(text.length);
    const mutated = i % 2 ? text.slice(0, at) : text.slice(0, at) + String.fromCharCode(rand(128)) + text.slice(at + 1);
    expect(() => coordinatorSample(mutated, "m", (us) => us)).not.toThrow();
  }
});
