// The short variant of scripts/chaos/kill-loop.ts: the worker killed with kill -9 at random moments
// while it drains a backlog, restarted each time, on ClickHouse 18.16 and on the 26.9 engine.
// Counted with merges stopped and without FINAL: nothing lost, no row and no envelope twice, and
// `cdr-worker audit` agrees. (The long run: --records 300000 --kills 20, docs/sizing.md "Performance".)
import { expect, setDefaultTimeout, test } from "bun:test";
import { committedToEnd } from "../../scripts/lib/harness.ts";
import { OTHER_PROTOCOLS } from "../support/protocols.ts";
import { reportScenario } from "../support/scenario-meter.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

// Regression: the run's end took the partitions the last worker's stats listed for all of them. A
// worker lists a partition only once a record of it is handed over, so with one partition done and
// two not yet handed out, the last worker was stopped early: the run reported the invalid records of
// those two partitions lost, and the audit, up to the group's commits, clean. The end is now read
// from the group's commits and the partitions' ends.
test("the run's end is every partition of the raw topic committed to its end, as Kafka has them", () => {
  const ends = new Map([[0, 26_849], [1, 10_000], [2, 10_000]]);
  expect(committedToEnd(new Map([[0, 26_849]]), ends)).toBe(false);
  expect(committedToEnd(new Map([[0, 26_849], [1, 9_999], [2, 10_000]]), ends)).toBe(false);
  expect(committedToEnd(new Map([[0, 26_849], [1, 10_000], [2, 10_000]]), ends)).toBe(true);
  expect(committedToEnd(new Map(), new Map())).toBe(false);
});

async function killLoop(env: Record<string, string | undefined>) {
  const p = Bun.spawn(["bun", `${ROOT}/scripts/chaos/kill-loop.ts`, "--records", "30000", "--kills", "3"], { env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  const report = JSON.parse(out.trim().split("\n").at(-1) || "null");
  expect({ code, report: report && { ...report, seconds: 0 } }).toMatchObject({
    code: 0,
    report: { delivery: "exactly-once", kills: 3, rows_twice: 0, envelopes_twice: 0, lost: 0, ok: true, audit: { exit_code: 0, audit: "clean" } },
  });
  expect(err).not.toContain('"level":"error"');
  reportScenario({
    scenario: `kill -9 loop, 30,000 records, 3 kills (${CLICKHOUSE_SERVERS.find((s) => s.url === env.CLICKHOUSE_URL)?.name})`,
    protocol: report.protocol,
    rows: report.rows_inserted,
    rows_twice: report.rows_twice,
    envelopes: report.dlq_messages,
    envelopes_twice: report.envelopes_twice,
    longest_stall_s: report.longest_stall_s,
  });
  return report as { protocol: string };
}

test.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s.url] as const))("%s: 3 kills during 30 000 records: every record once, by count and by audit", async (_name, url) => {
  await killLoop({ ...process.env, CLICKHOUSE_URL: url });
}, 300_000);

// The same on the protocols beside the default (ClickHouse 18.16): a killed member's partitions move
// incrementally (cooperative-sticky), or by the broker's reconciliation (KIP-848).
test.each(OTHER_PROTOCOLS.map((p) => [p.name, p] as const))("%s: 3 kills during 30 000 records: every record once, by count and by audit", async (_name, protocol) => {
  const report = await killLoop({ ...process.env, CLICKHOUSE_URL: CLICKHOUSE_SERVERS[0]!.url, ...protocol.env });
  expect(report.protocol).toBe(protocol.id);
}, 300_000);
