// The scale-out profile under faults (scripts/cluster/faults.ts): 3 KRaft brokers, 2 ClickHouse
// replicas of one shard, 3 workers in one group, 100k records a scenario. Each fault mid-stream
// must leave every valid record in ClickHouse on both replicas, every invalid one in the DLQ, and
// nothing else; a worker killed with -9 and a rolling SIGTERM restart must store and dead-letter
// nothing twice (exactly-once: counted without FINAL, merges stopped).
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { BROKERS, runFault, type Scenario } from "../../scripts/cluster/faults.ts";
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { ROOT, run } from "../support/services.ts";

setDefaultTimeout(60_000);

beforeAll(async () => {
  await run(["bash", `${ROOT}/scripts/services.sh`, "start", "cluster"]);
}, 240_000);
afterAll(async () => {
  await run(["bash", `${ROOT}/scripts/services.sh`, "stop", "cluster"]);
}, 120_000);

const scenarios: Array<[Scenario, string]> = [
  ["broker", "one broker kill -9'd mid-stream and restarted"],
  ["replica", "one ClickHouse replica stopped mid-stream; inserts continue on the other, replication catches up"],
  ["worker", "one worker kill -9'd while another joins the group"],
  ["rolling", "a rolling SIGTERM restart of all three workers: no record inserted twice"],
];

for (const [scenario, what] of scenarios) {
  test(`cluster, 100k records, 3 workers: ${what}`, async () => {
    const r = await runFault(scenario, { records: 100_000, seconds: 10 });
    console.error(JSON.stringify(r));
    expect(r.valid_produced + r.invalid_produced).toBe(100_000);
    expect(r.topics_min_insync_replicas).toEqual(["2", "2"]);
    expect(r.valid_in_clickhouse_distinct).toBe(r.valid_produced);
    expect(r.valid_on_replicas_distinct).toEqual([r.valid_produced, r.valid_produced]);
    expect(r.invalid_in_dlq_distinct).toBe(r.invalid_produced);
    expect(r.audit).toBe("clean"); // every offset once in ClickHouse or the DLQ, by the audit's count
    expect(r.sigterm_exit_codes.every((c) => c === 0)).toBe(true);
    // The fault happened while records were still arriving, not after the stream.
    const fault = r.events.findIndex((e) => /killing|stopping| killed| stopped/.test(e.what));
    const sent = r.events.findIndex((e) => e.what.startsWith("stream of"));
    expect(fault).toBeGreaterThanOrEqual(0);
    expect(fault).toBeLessThan(sent);
    // Counted as billing counts, beside distinct: a replica stopped mid-insert leaves a lost answer
    // that its own check settles, never a resend to the other replica.
    if (scenario !== "broker") expect([r.rows_twice, r.envelopes_twice, r.rows_inserted]).toEqual([0, 0, r.valid_produced]);
  }, 300_000);
}

/** The partition's leader as the cluster's metadata names it now (kcat -L). */
function leaderOf(topic: string): number | null {
  const out = Bun.spawnSync(["kcat", "-b", BROKERS, "-L", "-t", topic, "-m", "2"]).stdout.toString();
  const m = /partition 0, leader (-?\d+)/.exec(out);
  return m ? Number(m[1]) : null;
}

async function leaderBecomes(topic: string, ok: (leader: number) => boolean, what: string): Promise<number> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const l = leaderOf(topic);
    if (l !== null && l > 0 && ok(l)) return l;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what} (leader ${l})`);
    await Bun.sleep(200);
  }
}

// The tools (dlq inspect and replay, audit) and the harness ask a partition's watermarks with a
// blocking query. A broker restart moves its partitions' leadership away and, once it serves
// again, back (auto.leader.rebalance): a client whose metadata still names the old leader hears
// a transport error or NOT_LEADER_OR_FOLLOWER, which a second asking gets past.
test("regression: a watermark query rides out its partition's leader killed and handed back", async () => {
  const topic = `leader-move.${Date.now().toString(36)}`;
  const admin = new Admin({ "bootstrap.servers": BROKERS });
  const reader = new Consumer({ props: { "bootstrap.servers": BROKERS, "group.id": `${topic}-reader` }, topics: [] });
  try {
    await admin.createTopics([{ name: topic, partitions: 1, replicationFactor: 3, configs: {} }]);
    await admin.awaitServing([{ name: topic, partitions: 1 }]);
    const producer = new Producer({ "bootstrap.servers": BROKERS, acks: "all" });
    await producer.produceBatch(topic, ["a", "b", "c"]);
    producer.close();
    expect(reader.queryWatermarks(topic, 0).high).toBe(3);

    const first = await leaderBecomes(topic, () => true, "a leader");
    await run(["bash", `${ROOT}/scripts/cluster/kafka-brokers.sh`, "kill", String(first)]);
    await leaderBecomes(topic, (l) => l !== first, `a leader other than ${first}`);
    expect(reader.queryWatermarks(topic, 0, 15_000).high).toBe(3);

    await run(["bash", `${ROOT}/scripts/cluster/kafka-brokers.sh`, "start", String(first)]);
    await leaderBecomes(topic, (l) => l === first, `leadership handed back to ${first}`);
    expect(reader.queryWatermarks(topic, 0, 15_000).high).toBe(3);
  } finally {
    await reader.close();
    await admin.deleteTopics([topic]).catch(() => {});
    admin.close();
  }
}, 180_000);
