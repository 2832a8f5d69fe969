// The storage contract through the whole worker (Kafka → decode → ClickHouse), on ClickHouse 18.16
// and on the test endpoint around ClickHouse 26.9's engine, with the same assertions: every valid
// record at the edges of the rules lands exactly; a row ClickHouse refuses costs one DLQ envelope
// and no valid row; a batch a server refuses for its shape is split, never dead-lettered; a
// refusal of the worker (a table dropped) spends the retry budget, never split.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { ddlStatements } from "../../src/clickhouse/migrate.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { expectCorpus, readBack, storageCorpus } from "../fixtures/storage-corpus.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, committedOffsets, consumeN, header, props, text, withAdmin } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

async function produce(topic: string, values: string[], partition = 0): Promise<void> {
  const p = new Producer(props);
  try {
    await Promise.all(values.map((v) => p.produce(topic, v, { partition })));
  } finally {
    p.close();
  }
}

describe.each(CLICKHOUSE_SERVERS.map((server) => [server.name, server, e2eScope(server.url)] as const))("Storage contract on %s", (_name, server, { ch, names, distinctIds }) => {
  test("the worker learns the server's version and shows it per endpoint", async () => {
    const n = await names("version");
    const w = await startWorker(workerEnv(n));
    const s = await statsWhen(w, (s) => s.clickhouse_endpoints[0]?.version !== null, 10_000, "version learned");
    expect(s.clickhouse_endpoints[0].version).toMatch(server.version);
    const metrics = await (await fetch(`${w.statsUrl}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`cdr_worker_clickhouse_endpoint_info\\{endpoint="${new URL(server.url).host}",version="${s.clickhouse_endpoints[0].version.replaceAll(".", "\\.")}"\\} 1`));
    expect(await w.stop()).toBe(0);
    expect(w.logs.some((l) => l.includes('"ClickHouse endpoint answers"') && l.includes(s.clickhouse_endpoints[0].version))).toBe(true);
  }, 30_000);

  test("every edge record of the corpus is stored exactly through the whole worker, nothing in the DLQ", async () => {
    const n = await names("edges");
    const corpus = storageCorpus(0);
    const startedAt = Math.floor(Date.now() / 1000);
    await produce(n.raw, corpus.map((r) => r.text));
    const w = await startWorker(workerEnv(n));
    const s = await statsWhen(w, (s) => s.total_processed === corpus.length && s.partitions["0"]?.committed_offset === corpus.length, 30_000, "corpus processed");
    expect(await w.stop()).toBe(0);
    expect(s.total_dlq).toBe(0);
    expect((await committedCount(n.dlq))).toBe(0);
    const rows = await (await ch.query({ query: readBack(`${n.database}.${n.table}`).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" })).json<Record<string, string>>();
    const endedAt = Math.floor(Date.now() / 1000);
    for (const r of rows) {
      expect(Number(r.ingested_at)).toBeGreaterThanOrEqual(startedAt);
      expect(Number(r.ingested_at)).toBeLessThanOrEqual(endedAt);
      r.ingested_at = "0";
    }
    expectCorpus(rows, corpus);
  }, 60_000);

  // A refusal that survives a binary body, each server its own: on 26.9 a CHECK constraint an
  // operator added (it names the row and the column); 18.16 has no constraints, so a profile's
  // max_memory_usage (the `limited` user, scripts/clickhouse/users.xml) that 1000 small rows fit
  // in and one row of 4 MiB alone does not.
  const byConstraint = server.limitsPartitionsPerInsert;
  test(`one row ClickHouse refuses in a full batch of 1000 (${byConstraint ? "a CHECK constraint" : "the memory limit, refused alone"}): only it reaches the DLQ, whole, and every other row is inserted once`, async () => {
    const n = await names("poison");
    const table = `${n.database}.${n.table}`;
    const POISON = 613;
    const big = byConstraint ? "" : "x".repeat(4 << 20);
    if (byConstraint) await ch.command({ query: `ALTER TABLE ${table} ADD CONSTRAINT svc_fits CHECK length(service_type) <= 8` });
    else await withAdmin((a) => a.alterConfigs(n.raw, { "max.message.bytes": String(8 << 20) }));
    const poison = byConstraint ? { svc: "streaming-video" } : { device_id: big };
    const values = Array.from({ length: 1000 }, (_, i) => toJson(withFields({ raw_id: `p-${i}`, svc: "data", ...(i === POISON ? poison : {}) })));
    const p = new Producer({ ...props, "message.max.bytes": String(8 << 20) });
    try {
      await Promise.all(values.map((v) => p.produce(n.raw, v, { partition: 0 })));
    } finally {
      p.close();
    }
    const env = workerEnv(n, { BATCH_SIZE: "1000", BATCH_FLUSH_INTERVAL_SECONDS: "30", BATCH_MAX_BYTES: String(64 << 20) });
    // ClickHouse, not RECORD_MAX_BYTES, must be what refuses the 4 MiB row here.
    if (!byConstraint) Object.assign(env, { CLICKHOUSE_USER: "limited", RECORD_MAX_BYTES: String(8 << 20) });
    const w = await startWorker(env);
    const s = await statsWhen(w, (s) => s.total_processed === 1000 && s.partitions["0"]?.committed_offset === 1000, 60_000, "batch stored");
    expect(await w.stop()).toBe(0);
    expect(s).toMatchObject({ total_clickhouse: 999, total_dlq: 1, clickhouse_refused_rows: 1, clickhouse_exhausted_batches: 0, clickhouse_retries: 0 });
    expect(s.by_dlq_reason.normalization_error).toBe(1);
    expect(s.clickhouse_split_inserts).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(1000)) + 2);
    const counts = await (await ch.query({ query: `SELECT count() AS rows, uniqExact(raw_id) AS ids FROM ${table}`, format: "JSONEachRow" })).json<{ rows: string; ids: string }>();
    expect(counts.map((c) => [Number(c.rows), Number(c.ids)])).toEqual([[999, 999]]);
    const [dlq] = await consumeN(n.dlq, 1);
    expect(header(dlq!, HEADERS.sourceOffset)).toBe(String(POISON));
    expect(header(dlq!, HEADERS.stage)).toBe("clickhouse-refused");
    if (byConstraint) {
      // The server names the column: so does the envelope.
      expect(JSON.parse(text(dlq!))).toMatchObject({ failure_reason: "normalization_error", failed_field: "service_type", original_payload: { raw_id: `p-${POISON}`, svc: "streaming-video" } });
      expect(header(dlq!, HEADERS.detail)).toMatch(/Code: 469\b.*svc_fits/);
    } else {
      // A memory refusal names no column; the payload is over the envelope's limit and travels truncated, flagged.
      expect(JSON.parse(text(dlq!))).toMatchObject({ failure_reason: "normalization_error", failed_field: null });
      expect(header(dlq!, HEADERS.detail)).toMatch(/Code: 241\b/);
      expect(header(dlq!, HEADERS.truncated)).toBe("true");
    }
    expect((await committedCount(n.dlq))).toBe(1);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(1000n);
    expect(await distinctIds(n)).toBe(999);
  }, 90_000);
  test("a batch spanning more than 100 months is stored whole, split only where the server limits partitions per insert, nothing dead-lettered", async () => {
    const n = await names("months");
    const MONTH = 2_700_000; // a little over 31 days: each record in a month of its own
    const values = Array.from({ length: 150 }, (_, i) => toJson(withFields({ raw_id: `m-${i}`, epoch_start: 1_000_000_000 + i * MONTH, epoch_end: 1_000_000_060 + i * MONTH })));
    await produce(n.raw, values);
    const w = await startWorker(workerEnv(n, { BATCH_SIZE: "1000", BATCH_FLUSH_INTERVAL_SECONDS: "2" }));
    const s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 150, 30_000, "batch stored");
    expect(await w.stop()).toBe(0);
    expect(s).toMatchObject({ total_clickhouse: 150, total_dlq: 0, clickhouse_refused_rows: 0, clickhouse_exhausted_batches: 0, clickhouse_retries: 0 });
    if (server.limitsPartitionsPerInsert) expect(s.clickhouse_split_inserts).toBeGreaterThanOrEqual(2);
    else expect(s.clickhouse_split_inserts).toBe(0);
    const months = await (await ch.query({ query: `SELECT uniqExact(toYYYYMM(session_start_time)) AS m, count() AS c FROM ${n.database}.${n.table}`, format: "JSONEachRow" })).json<{ m: string; c: string }>();
    expect(months.map((r) => [Number(r.m), Number(r.c)])).toEqual([[150, 150]]);
    expect((await committedCount(n.dlq))).toBe(0);
  }, 60_000);

  test("a table dropped under a running worker is a refusal of the worker: at the spec's defaults it spends the retry budget, then the spec's path", async () => {
    const n = await names("gone");
    const w = await startWorker(workerEnv(n, { CH_RETRY_INITIAL_DELAY_MS: "300" }));
    await produce(n.raw, [toJson(withFields({ raw_id: "before" }))]);
    await statsWhen(w, (s) => s.total_clickhouse === 1, 20_000, "first row stored");
    await ch.command({ query: `DROP TABLE ${n.database}.${n.table}` });
    await produce(n.raw, [toJson(withFields({ raw_id: "after" }))]);
    const s = await statsWhen(w, (s) => s.total_dlq === 1 && s.partitions["0"]?.committed_offset === 2, 20_000, "record dead-lettered");
    expect(await w.stop()).toBe(0);
    // Retried whole, never split: the budget's 3 attempts (DECISIONS "Commits and rebalances").
    expect(s).toMatchObject({ clickhouse_retries: 2, clickhouse_exhausted_batches: 1, clickhouse_split_inserts: 0 });
    const [dlq] = await consumeN(n.dlq, 1);
    expect(JSON.parse(text(dlq!))).toMatchObject({ failure_reason: "normalization_error", failed_field: null, original_payload: { raw_id: "after" } });
    expect(header(dlq!, HEADERS.attempts)).toBe("3");
    expect(header(dlq!, HEADERS.detail)).toMatch(/Code: 60\b/);
  }, 60_000);

  test("run refuses to start against a table it cannot encode exactly: exit 2, one line per column naming both types", async () => {
    const n = await names("types");
    const table = `${n.database}.${n.table}`;
    await ch.command({ query: `DROP TABLE ${table}` });
    const ddl = ddlStatements(n.database, n.table)[1]!
      .replace(/up_bytes\s+UInt64/, "up_bytes UInt32")
      .replace(/service_type\s+String/, "service_type Nullable(String)")
      .replace("'LTE_4G' = 6", "'LTE_4G' = 4")
      .replace(/\s+cell_id\s+String,/, "")
      .replace("msisdn, cell_id, cdr_id", "msisdn, cdr_id")
      .replace(/session_end_time\s+DateTime\('UTC'\)/, "session_end_time DateTime")
      .replace(/source_ip\s+UInt32/, "source_ip UInt32 MATERIALIZED 0");
    await ch.command({ query: ddl });
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], { env: workerEnv(n), stdout: "pipe", stderr: "pipe" });
    const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(2);
    const lines = err.trim().split("\n");
    const expected = [
      `schema error: ${table}: column service_type is Nullable(String); the worker writes String`,
      `schema error: ${table}: column radio_access_type is Enum8('3G' = 1, 'LTE_4G' = 4, '5G_NR' = 9); the worker writes Enum8('3G' = 1, 'LTE_4G' = 6, '5G_NR' = 9)`,
      `schema error: ${table}: column cell_id is missing; the worker writes it as String`,
      `schema error: ${table}: column up_bytes is UInt32; the worker writes UInt64`,
      `schema error: ${table}: column source_ip is MATERIALIZED`,
    ];
    expect(lines.length).toBe(expected.length);
    expected.forEach((e, i) => expect(lines[i]).toStartWith(e));
    // A DateTime without the time zone stores the same UInt32: not a problem.
    expect(err).not.toContain("session_end_time");
  }, 30_000);

  test("run refuses to start against a missing table, naming it, before consuming anything", async () => {
    const n = await names("missing");
    await ch.command({ query: `DROP TABLE ${n.database}.${n.table}` });
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], { env: workerEnv(n), stdout: "pipe", stderr: "pipe" });
    const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(1);
    expect(err).toContain(`table ${n.database}.${n.table} does not exist; run \`cdr-worker migrate\``);
  }, 30_000);
});
