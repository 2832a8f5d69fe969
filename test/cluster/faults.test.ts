// The scale-out profile under faults (scripts/cluster/faults.ts): 3 KRaft brokers, 2 ClickHouse
// replicas of one shard, 3 workers in one group, 100k records a scenario. Each fault mid-stream
// must leave every valid record in ClickHouse on both replicas, every invalid one in the DLQ, and
// nothing else; a worker killed with -9 and a rolling SIGTERM restart must store and dead-letter
// nothing twice (exactly-once: counted without FINAL, merges stopped).
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { runFault, type Scenario } from "../../scripts/cluster/faults.ts";
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
    if (scenario === "rolling" || scenario === "worker") expect([r.rows_twice, r.envelopes_twice, r.rows_inserted]).toEqual([0, 0, r.valid_produced]);
  }, 300_000);
}
