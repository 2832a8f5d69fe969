// `cdr-worker trace` against the real broker, on 18.16 and the 26.9 engine: where a stored, a dead-lettered, an
// unconsumed and an expired record are, by raw_id and by partition and offset, and a raw_id found
// nowhere. The DLQ table is filled by `dlq fill`; the expired records are deleted by Kafka's own
// DeleteRecords, as retention does.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { deleteRecordsBefore, props } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT, waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const SERVERS = CLICKHOUSE_SERVERS.map((server) => [server.name, e2eScope(server.url)] as const);

async function produce(topic: string, values: string[], partition: number): Promise<void> {
  const p = new Producer(props);
  try {
    for (const v of values) await p.produce(topic, v, { partition });
  } finally {
    p.close();
  }
}

async function trace(env: Record<string, string>, ...args: string[]): Promise<{ code: number; line: Record<string, any> }> {
  const p = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "trace", ...args], { env, stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  const last = out.trim().split("\n").at(-1) ?? "";
  if (!last.startsWith("{")) throw new Error(`trace ${args.join(" ")} exited ${code} without its line: ${err}`);
  return { code, line: JSON.parse(last) };
}

test.each(SERVERS)("%s: trace says where a stored, a dead-lettered, an unconsumed and an expired record are, and that an unknown raw_id is nowhere", async (_server, { ch, names }) => {
  const n = await names("trace");
  const env = workerEnv(n);
  // Partition 0: a valid record, then one with rat 7 (dead-lettered).
  await produce(n.raw, [toJson(withFields({ raw_id: "trace-stored" })), toJson(withFields({ raw_id: "trace-dead", rat: 7 }))], 0);
  const w = await startWorker(env);
  await statsWhen(w, (s) => s.total_clickhouse === 1 && s.total_dlq === 1 && s.partitions["0"]?.committed_offset === 2, 30_000, "one stored, one dead-lettered, committed");
  expect(await w.stop()).toBe(0);
  // No DLQ table yet: the dead-lettered record is found in the DLQ topic, not called a loss.
  const unfilled = await trace(env, "--partition", "0", "--offset", "1");
  expect({ code: unfilled.code, line: unfilled.line }).toMatchObject({ code: 0 });
  expect(unfilled.line).toMatchObject({ verdict: "dead_lettered", dead_lettered: [{ failure_reason: "invalid_rat_value", failed_field: "rat", source_offset: 1 }], dlq_topic: { envelopes_read: 1, found: 1, unproven: 0 } });
  expect(unfilled.line.says).toContain("the DLQ table does not hold it yet");
  // The DLQ table, as `dlq fill` keeps it.
  const filler = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "fill"], { env, stdout: "ignore", stderr: "ignore" });
  try {
    await waitFor(async () => {
      const r = await ch.query({ query: `SELECT count() AS c FROM ${n.database}.${n.table}_dlq`, format: "JSONEachRow" }).catch(() => null);
      const rows = r ? await r.json<{ c: string }>() : [];
      return Number(rows[0]?.c ?? 0) === 1 ? true : undefined;
    }, 30_000, "the DLQ table's row");
  } finally {
    filler.kill("SIGTERM");
    await filler.exited;
  }
  // Past the commit: not yet consumed. Partition 1: two records deleted before any worker read them.
  await produce(n.raw, [toJson(withFields({ raw_id: "trace-waiting" }))], 0);
  await produce(n.raw, [toJson(withFields({ raw_id: "trace-gone-1" })), toJson(withFields({ raw_id: "trace-gone-2" }))], 1);
  await deleteRecordsBefore(n.raw, { 1: 2 });

  const byId = await trace(env, "trace-stored");
  expect(byId.code).toBe(0);
  expect(byId.line).toMatchObject({ verdict: "stored", cdr_id: Bun.randomUUIDv5("trace-stored", "dns"), stored: [{ partition: 0, offset: 0 }] });
  const atZero = await trace(env, "--partition", "0", "--offset", "0");
  expect(atZero.line).toMatchObject({ verdict: "stored", stored: [{ cdr_id: Bun.randomUUIDv5("trace-stored", "dns") }] });

  const dead = await trace(env, "trace-dead");
  expect(dead.line).toMatchObject({ verdict: "dead_lettered", dead_lettered: [{ failure_reason: "invalid_rat_value", failed_field: "rat", source_partition: 0, source_offset: 1 }] });
  expect((await trace(env, "--partition", "0", "--offset", "1")).line.verdict).toBe("dead_lettered");

  const waiting = await trace(env, "--partition", "0", "--offset", "2");
  expect(waiting.line).toMatchObject({ verdict: "not_yet_consumed", position: { committed: 2, high: 3 } });
  expect(waiting.line.says).toContain("1 records wait");

  const gone = await trace(env, "--partition", "1", "--offset", "0");
  expect(gone.line).toMatchObject({ verdict: "gone", position: { low: 2, high: 2 } });

  const nowhere = await trace(env, "never-sent");
  expect(nowhere.code).toBe(0);
  expect(nowhere.line.verdict).toBe("found_nowhere");
  expect(nowhere.line.positions).toHaveLength(3);
  expect((await trace(env, "--partition", "0", "--offset", "9")).line.verdict).toBe("not_yet_written");
}, 120_000);
