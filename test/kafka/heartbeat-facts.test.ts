// scripts/librdkafka/patches/heartbeat-facts.patch on librdkafka's own mock cluster, the one place a
// coordinator's answer to a heartbeat can be chosen: each answer becomes the member's standing that
// the membership lease reads (kafka/heartbeat-proof.ts), on both group protocols. Unpatched, the
// statistics show no heartbeat answer, and a fenced KIP-848 member looked as steady as an accepted one.
import type { Pointer } from "bun:ffi";
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import type { Standing } from "../../src/kafka/heartbeat-proof.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Producer } from "../../src/kafka/producer.ts";
import { mockClusterWith, mockControls } from "../support/mock-cluster.ts";

setDefaultTimeout(60_000);

const HEARTBEAT = 12, CONSUMER_GROUP_HEARTBEAT = 68;
const ERR = {
  UNKNOWN_MEMBER_ID: 25,
  REBALANCE_IN_PROGRESS: 27,
  GROUP_AUTHORIZATION_FAILED: 30,
  FENCED_MEMBER_EPOCH: 110,
};

interface Member {
  consumer: Consumer;
  standings: Array<Standing & { at: number }>;
  cluster: Pointer;
  holder: Producer;
  /** While true, a revocation stays pending, as one the worker cannot settle yet. */
  holdRevocations: boolean;
  stop: () => Promise<void>;
}

const members: Member[] = [];
afterEach(async () => {
  // The last first: a joining member shares the first one's cluster.
  for (const m of members.splice(0).reverse()) await m.stop();
});

/**
 * A member of a group on a fresh one-broker mock cluster (or `joining` another's), polled until
 * stopped, its standings kept.
 */
function member(protocol: "classic" | "consumer", joining?: { of: Member; topic: string }): Member & { topic: string } {
  const topic = joining?.topic ?? `hb-facts-${protocol}-${crypto.randomUUID()}`;
  const { holder, bootstraps } = joining
    ? { holder: joining.of.holder, bootstraps: "" }
    : mockClusterWith(topic, 2);
  const cluster = mockControls().rd_kafka_handle_mock_cluster(holder.handle) as Pointer;
  const props: Record<string, string> = {
    "bootstrap.servers": bootstraps || String(mockControls().rd_kafka_mock_cluster_bootstraps(cluster)),
    "group.id": `${topic}-group`,
    "statistics.interval.ms": "100",
    "group.protocol": protocol,
  };
  if (protocol === "classic") Object.assign(props, { "session.timeout.ms": "6000", "heartbeat.interval.ms": "200" });
  const consumer = new Consumer({ props, topics: [topic] });
  const standings: Member["standings"] = [];
  consumer.onStanding((s) => standings.push({ ...s, at: performance.now() }));
  let polling = true;
  let loop: Promise<void> = Promise.resolve();
  const m: Member & { topic: string } = {
    consumer,
    standings,
    cluster,
    holder,
    topic,
    holdRevocations: false,
    stop: async () => {
      polling = false;
      await loop;
      await consumer.close();
      if (!joining) holder.close();
    },
  };
  loop = (async () => {
    while (polling) {
      // A revocation settles at once unless held: nothing is held here, and polls serve the statistics.
      if (consumer.pendingRevoke && !m.holdRevocations) consumer.completeRevoke();
      consumer.poll(20, true);
      await consumer.waitForMessages(50);
    }
  })();
  members.push(m);
  return m;
}

async function until<T>(what: string, f: () => T | undefined | null | false, ms = 30_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (performance.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await Bun.sleep(20);
  }
}

const last = (m: Member) => m.standings.at(-1);

/** The standings after `since`, once one of them satisfies `f`. */
async function standingAfter(m: Member, since: number, f: (s: Standing) => boolean, what: string): Promise<Standing> {
  return until(what, () => m.standings.find((s) => s.at > since && f(s)));
}

function pushErrors(m: Member, apiKey: number, errors: number[]): void {
  const arr = new Int32Array(errors);
  mockControls().rd_kafka_mock_push_request_errors_array(m.cluster, apiKey, errors.length, arr);
}

for (const protocol of ["classic", "consumer"] as const) {
  const apiKey = protocol === "classic" ? HEARTBEAT : CONSUMER_GROUP_HEARTBEAT;

  test(`${protocol}: an accepted heartbeat is a standing sent no later than it was answered, and heartbeats renew it`, async () => {
    const m = member(protocol);
    const first = await until("a heartbeat accepted", () => m.standings.find((s) => s.kind === "accepted"));
    expect(first.kind).toBe("accepted");
    if (first.kind !== "accepted") return;
    expect(first.sentAfter).toBeLessThanOrEqual(first.at);
    expect(first.rebalanceSince).toBeNull();
    const later = await standingAfter(m, first.at, (s) => s.kind === "accepted" && s.sentAfter > first.sentAfter, "a later heartbeat");
    expect(later.kind).toBe("accepted");
  });

  const refusals: Array<[string, number]> = [
    ["UNKNOWN_MEMBER_ID", ERR.UNKNOWN_MEMBER_ID],
    ["GROUP_AUTHORIZATION_FAILED", ERR.GROUP_AUTHORIZATION_FAILED],
    ...(protocol === "consumer" ? ([["FENCED_MEMBER_EPOCH", ERR.FENCED_MEMBER_EPOCH]] as Array<[string, number]>) : []),
  ];
  for (const [name, code] of refusals)
    test(`${protocol}: a heartbeat answered ${name} is a refusal, whatever the group's state says`, async () => {
      const m = member(protocol);
      await until("a heartbeat accepted", () => last(m)?.kind === "accepted");
      const before = performance.now();
      // Refused again and again: under KIP-848 a member told it is unknown rejoins within a few
      // milliseconds, and a single refusal could fall between two samples.
      pushErrors(m, apiKey, Array(10).fill(code));
      const refused = await standingAfter(m, before, (s) => s.kind === "refused", `${name} seen`);
      expect(refused.kind === "refused" && refused.err).toBe(code);
    });
}

test("classic: REBALANCE_IN_PROGRESS keeps the session, and the rebalance began after the last heartbeat answered without it", async () => {
  const m = member("classic");
  const ok = await until("a heartbeat accepted", () => {
    const s = last(m);
    return s?.kind === "accepted" ? s : undefined;
  });
  const before = performance.now();
  pushErrors(m, HEARTBEAT, [ERR.REBALANCE_IN_PROGRESS]);
  const rebalancing = await standingAfter(m, before, (s) => s.kind === "accepted" && s.rebalanceSince !== null, "a rebalance seen");
  if (rebalancing.kind !== "accepted") throw new Error("not accepted");
  expect(rebalancing.rebalanceSince).toBeGreaterThanOrEqual(ok.sentAfter);
  expect(rebalancing.rebalanceSince).toBeLessThan(rebalancing.sentAfter);
});

test("classic: an answer that comes late is dated by its sending, not its arrival", async () => {
  const m = member("classic");
  await until("a heartbeat accepted", () => last(m)?.kind === "accepted");
  const before = performance.now();
  expect(mockControls().rd_kafka_mock_broker_push_request_error_rtts(m.cluster, 1, HEARTBEAT, 1, 0, 1_500)).toBe(0);
  // The slow answer is the first accepted one whose sending lies 1.5 s before it was seen.
  const slow = await until("the slow heartbeat answered", () =>
    m.standings.find((s) => s.at > before + 1_500 && s.kind === "accepted" && s.at - s.sentAfter >= 1_500),
  );
  expect(slow.kind).toBe("accepted");
});

test("consumer: a revocation the member owes dates its start by the heartbeat that was answered with it, until the member acknowledges", async () => {
  const a = member("consumer");
  const steady = await until("a heartbeat accepted", () => {
    const s = last(a);
    return s?.kind === "accepted" && a.consumer.assignment.length === 2 ? s : undefined;
  });
  if (steady.kind !== "accepted") throw new Error("not accepted");
  expect(steady.rebalanceSince).toBeNull();
  a.holdRevocations = true;
  const joined = performance.now();
  member("consumer", { of: a, topic: a.topic });
  const owing = await standingAfter(a, joined, (s) => s.kind === "accepted" && s.rebalanceSince !== null, "a revocation owed");
  if (owing.kind !== "accepted") throw new Error("not accepted");
  expect(a.consumer.pendingRevoke).not.toBeNull();
  expect(owing.rebalanceSince).toBeGreaterThanOrEqual(steady.sentAfter);
  expect(owing.rebalanceSince).toBeLessThanOrEqual(owing.sentAfter);
  // Heartbeats go on while it is owed, and the start stays where it was.
  const still = await standingAfter(a, performance.now(), (s) => s.kind === "accepted" && s.sentAfter > owing.sentAfter, "a later heartbeat");
  expect(still.kind === "accepted" && still.rebalanceSince).toBe(owing.rebalanceSince);
  const released = performance.now();
  a.holdRevocations = false;
  await standingAfter(a, released, (s) => s.kind === "accepted" && s.rebalanceSince === null, "the revocation acknowledged");
});
