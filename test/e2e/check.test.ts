// `cdr-worker check` against the real broker and each ClickHouse: a good configuration passes and
// consumes nothing; a broken one prints every problem, one line each, and exits as `run` exits on
// the same configuration; an endpoint down beside one that answers is a warning, as `run` starts.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedSum, createTopic, props } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { startWorker, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const KEY = "c".repeat(64);

async function cli(env: Record<string, string>, ...args: string[]) {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env: { ...env, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s", (_name, server) => {
  const scope = e2eScope(server.url);

  test("check --wait, started beside migrate as the set-up Jobs are: waits while the table is missing, passes once it is made", async () => {
    const n = await scope.names("checkwait");
    const table = `${n.database}.${n.table}`;
    await scope.ch.command({ query: `RENAME TABLE ${table} TO ${table}_aside` });
    const checking = cli(workerEnv(n, { DLQ_PROVENANCE_KEY: KEY }), "check", "--wait", "60");
    await Bun.sleep(7_000);
    await scope.ch.command({ query: `RENAME TABLE ${table}_aside TO ${table}` });
    const { code, stdout, stderr } = await checking;
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ check: "passed", problems: 0 });
    const waits = stderr.split("\n").filter((l) => l.startsWith("check: "));
    expect(waits.length).toBeGreaterThanOrEqual(1);
    expect(waits[0]).toMatch(/does not exist; run `cdr-worker migrate`.*again in 5 s/);
  });

  test("a good configuration passes, names the server's version, and consumes nothing", async () => {
    const n = await scope.names("check");
    const p = new Producer(props);
    await p.produce(n.raw, toJson(withFields({ raw_id: "check-1" })), { partition: 0 }).finally(() => p.close());
    const { code, stdout, stderr } = await cli(workerEnv(n, { DLQ_PROVENANCE_KEY: KEY }), "check");
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    const summary = JSON.parse(stdout);
    expect(summary).toMatchObject({ check: "passed", exit: 0, problems: 0, delivery: "exactly-once", dlq_provenance: "signed" });
    expect(summary.kafka).toMatchObject({ passed: true, topics: [n.raw, n.dlq] });
    expect(summary.clickhouse).toHaveLength(1);
    expect(summary.clickhouse[0].passed).toBe(true);
    expect(summary.clickhouse[0].version).toMatch(server.version);
    expect(await scope.storedCounts(n)).toEqual({ rows: 0, ids: 0, offsetRows: 0, offsets: 0 });
    expect(committedSum(n.group, n.raw, 3) ?? 0).toBe(0);
  });

  test("a broken configuration: every problem on a line of its own, and the exit run gives", async () => {
    const n = await scope.names("check-broken");
    // No key under exactly-once, a DLQ topic and a table that do not exist: three problems.
    const broken = workerEnv(n, { DLQ_PROVENANCE: "signed", KAFKA_TOPIC_DLQ: `${n.dlq}-absent`, CLICKHOUSE_TABLE: `${n.table}_absent` });
    const checked = await cli(broken, "check");
    const lines = checked.stderr.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toStartWith("config error: DLQ_PROVENANCE_KEY=(unset): expected a key under exactly-once");
    expect(lines[1]).toBe(`error TOPOLOGY: topic ${n.dlq}-absent missing; run \`cdr-worker topics ensure\``);
    expect(lines[2]).toContain(`${n.table}_absent`);
    expect(JSON.parse(checked.stdout)).toMatchObject({ check: "failed", exit: 2, problems: 3 });
    const ran = await cli(broken, "run");
    expect(checked.code).toBe(2);
    expect(ran.code).toBe(checked.code);

    // With a key, run meets the missing topic first: a runtime failure, exit 1, for both.
    const keyed = { ...broken, DLQ_PROVENANCE_KEY: KEY };
    const [checkedKeyed, ranKeyed] = await Promise.all([cli(keyed, "check"), cli(keyed, "run")]);
    expect(checkedKeyed.stderr.trim().split("\n")).toHaveLength(2);
    expect({ check: checkedKeyed.code, run: ranKeyed.code }).toEqual({ check: 1, run: 1 });
    expect(ranKeyed.stderr).toContain("TOPOLOGY");
  });

  test("one endpoint down beside one that answers: a warning naming it, and a pass", async () => {
    const n = await scope.names("check-endpoints");
    const env = workerEnv({ ...n, clickhouseUrl: `http://127.0.0.1:9,${server.url}` }, { DLQ_PROVENANCE_KEY: KEY });
    const { code, stdout, stderr } = await cli(env, "check");
    expect(code).toBe(0);
    expect(stderr.trim().split("\n")).toEqual([expect.stringMatching(/^warning: 127\.0\.0\.1:9: /)]);
    const summary = JSON.parse(stdout);
    expect(summary.clickhouse.map((e: { passed: boolean }) => e.passed)).toEqual([false, true]);
  });
});

const pageScope = e2eScope();

test("an endpoint that answers a page where a version should be is a warning beside one that answers, not a crash", async () => {
  const page = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("<html>Bad Gateway</html>\n") });
  try {
    const n = await pageScope.names("check-page");
    const env = workerEnv({ ...n, clickhouseUrl: `http://127.0.0.1:${page.port},${CLICKHOUSE_SERVERS[0]!.url}` }, { DLQ_PROVENANCE_KEY: KEY });
    const { code, stdout, stderr } = await cli(env, "check");
    expect(code).toBe(0);
    expect(stderr.trim().split("\n")).toEqual([expect.stringMatching(new RegExp(`^warning: 127\\.0\\.0\\.1:${page.port}: `))]);
    expect(JSON.parse(stdout).clickhouse.map((e: { version: string | null }) => e.version)).toEqual([null, expect.stringMatching(/^18\.16\./)]);
  } finally {
    page.stop(true);
  }
});

test("a stop deadline below one insert's retry budget: check refuses it, one line, exit 2; run starts and says so", async () => {
  const n = await pageScope.names("check-deadline");
  const env = workerEnv(n, { DLQ_PROVENANCE_KEY: KEY, SHUTDOWN_TIMEOUT_SECONDS: "20" });
  const { code, stdout, stderr } = await cli(env, "check");
  expect(stderr.trim().split("\n")).toEqual([
    expect.stringMatching(/^config error: SHUTDOWN_TIMEOUT_SECONDS="?20"?: expected at least 45: one insert's retry budget/),
  ]);
  expect({ code, summary: JSON.parse(stdout) }).toMatchObject({ code: 2, summary: { check: "failed", exit: 2, problems: 1 } });
  const w = await startWorker({ ...env, LOG_LEVEL: "info" });
  try {
    expect(w.logs.some((l) => l.includes('"level":"warn"') && l.includes("SHUTDOWN_TIMEOUT_SECONDS=20, expected at least 45"))).toBe(true);
  } finally {
    expect(await w.stop()).toBe(0);
  }
});

test("a compacted raw topic: check refuses it, one line naming the policy and the fix; run starts and says it once", async () => {
  const n = await pageScope.names("check-compact");
  const raw = await createTopic("check-compacted-raw", 3, { "cleanup.policy": "compact,delete", "compression.type": "lz4" });
  const env = workerEnv({ ...n, raw }, { DLQ_PROVENANCE_KEY: KEY });
  const { code, stdout, stderr } = await cli(env, "check");
  expect(stderr.trim().split("\n")).toEqual([
    `error TOPOLOGY: the raw topic ${raw} has cleanup.policy=compact,delete: compaction deletes records before they are fetched, ` +
      "and each offset it leaves empty is dead-lettered as skipped; set cleanup.policy=delete",
  ]);
  expect({ code, summary: JSON.parse(stdout) }).toMatchObject({ code: 1, summary: { check: "failed", problems: 1 } });
  // The same worker on the spec's topic: no such line.
  expect((await cli(workerEnv(n, { DLQ_PROVENANCE_KEY: KEY }), "check")).code).toBe(0);
  const w = await startWorker({ ...env, LOG_LEVEL: "info" });
  try {
    expect(w.logs.filter((l) => l.includes('"level":"error"') && l.includes("cleanup.policy=compact,delete"))).toHaveLength(1);
  } finally {
    expect(await w.stop()).toBe(0);
  }
});
