// `cdr-worker audit` against what a real worker left on ClickHouse 18.16 and on the 26.9 engine:
// clean after a run (a producer's replay reported apart, not a failure); a gap and a duplicate that
// the test injects are found, by offset, and fail it.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { commitMetadata } from "../../src/delivery/offsets/commit-metadata.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const N = 120;
const INVALID = new Set([7, 50, 51]);
const REPLAYED = 90; // the producer sends record 30 again as offset 90 (same raw record, same cdr_id)
const value = (i: number) => (INVALID.has(i) ? `not json ${i}` : toJson(withFields({ raw_id: `audit-${i === REPLAYED ? 30 : i}` })));

function audit(n: Names, ...flags: string[]) {
  return auditWith(n, {}, ...flags);
}
function auditWith(n: Names, env: Record<string, string>, ...flags: string[]) {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "audit", ...flags], { env: workerEnv(n, { LOG_LEVEL: "warn", ...env }), stdout: "pipe", stderr: "pipe" });
  const lines = p.stdout.toString().trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  return { code: p.exitCode, partitions: lines.slice(0, -1), summary: lines.at(-1), stderr: p.stderr.toString() };
}

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, e2eScope(s.url)] as const))("audit on %s", (_name, { ch, names }) => {
  test("clean after a worker's run; then a gap and a duplicate injected are found by offset, after merges too, and exit 1", async () => {
    const n = await names("audit");
    const producer = new Producer(props);
    try {
      for (let i = 0; i < N; i++) await producer.produce(n.raw, value(i), { partition: 0 });
    } finally {
      producer.close();
    }
    const w = await startWorker(workerEnv(n));
    await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === N, 30_000, "every offset committed");
    expect(await w.stop()).toBe(0);

    const clean = audit(n);
    expect({ code: clean.code, stderr: clean.stderr }).toEqual({ code: 0, stderr: "" });
    // The replay of record 30 at offset 90 is one row or two: current releases collapse a
    // ReplacingMergeTree block's equal keys at insert (optimize_on_insert), 18.16 only at a merge.
    // Either way the audit says so, apart from the findings.
    const collapsed = clean.summary.producer_replays_collapsed;
    expect(clean.summary.producer_replays + collapsed).toBe(1);
    expect(clean.partitions.map((p) => [p.partition, p.from, p.to, p.records, p.stored + p.replays_collapsed, p.dead_lettered])).toEqual([
      [0, 0, N, N, N - INVALID.size, INVALID.size],
      [1, 0, 0, 0, 0, 0], // nothing produced there: its committed offset is its start
      [2, 0, 0, 0, 0, 0],
    ]);
    expect(clean.summary).toMatchObject({ audit: "clean", missing: 0, stored_twice: 0, rows_before_provenance: 0 });
    // The first endpoint down: the audit reads the next one.
    const failover = auditWith(n, { CLICKHOUSE_URL: `http://127.0.0.1:1,${n.clickhouseUrl}` });
    expect({ code: failover.code, stderr: failover.stderr }).toEqual({ code: 0, stderr: "" });
    expect(failover.summary).toMatchObject({ audit: "clean" });
    // Partitions named out of order, one twice: read in order, once each, still clean.
    const unsorted = audit(n, "--partitions", "2,0,0");
    expect({ code: unsorted.code, stderr: unsorted.stderr }).toEqual({ code: 0, stderr: "" });
    expect(unsorted.partitions.map((p) => p.partition)).toEqual([0, 2]);

    // A gap: one more record, and the group's offset moved past it without any worker.
    const late = new Producer(props);
    await late.produce(n.raw, value(0).replace("audit-0", "audit-late"), { partition: 0 });
    late.close();
    const group = new Consumer({ props: { ...props, "group.id": n.group }, topics: [] });
    await group.commit([{ topic: n.raw, partition: 0, offset: BigInt(N + 1), metadata: commitMetadata(Date.now()) }]);
    await group.close();
    // A duplicate: record 12's row stored a second time.
    const t = `${n.database}.${n.table}`;
    await ch.command({ query: `INSERT INTO ${t} SELECT * FROM ${t} WHERE kafka_partition = 0 AND kafka_offset = 12` });

    // Merges collapse the two rows into one here; the offsets table still holds both.
    await ch.command({ query: `OPTIMIZE TABLE ${t} FINAL` });
    const rowsAt12 = await (await ch.query({ query: `SELECT count() AS c FROM ${t} WHERE kafka_partition = 0 AND kafka_offset = 12`, format: "JSONEachRow" })).json<{ c: string }>();
    expect(Number(rowsAt12[0]!.c)).toBe(1);

    const found = audit(n);
    expect(found.code).toBe(1);
    expect(found.partitions[0]).toMatchObject({ to: N + 1, records: N + 1, missing: 1, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0 });
    expect(found.partitions[0].samples).toMatchObject({ missing: [N], stored_twice: [12] });
    expect(found.summary).toMatchObject({ audit: "failed", missing: 1, stored_twice: 1 });

    // A narrower range leaves both out: offsets [20, 100) only.
    const narrow = audit(n, "--partitions", "0", "--from-offset", "20", "--to-offset", "100");
    expect(narrow.code).toBe(0);
    expect(narrow.partitions.map((p) => [p.partition, p.from, p.to, p.records])).toEqual([[0, 20, 100, 80]]);
  });

  test("scheduled by the worker (AUDIT_INTERVAL_SECONDS): clean, then a row stored twice shows in stats and metrics", async () => {
    const n = await names("auditsched");
    // Each run covers the last two intervals: 12 s keeps the records in the run after the one that
    // saw them committed, though a worker that has just joined inserts only ~4 s after it started.
    const w = await startWorker(workerEnv(n, { AUDIT_INTERVAL_SECONDS: "12" }));
    try {
      const producer = new Producer(props);
      for (let i = 0; i < 20; i++) await producer.produce(n.raw, value(i), { partition: 1 });
      producer.close();
      const first = await statsWhen(w, (s) => s.partitions["1"]?.committed_offset === 20 && s.last_audit !== null && Date.parse(s.last_commit_at) < Date.parse(s.last_audit.at), 30_000, "audited after the commit");
      expect(first.last_audit).toMatchObject({ result: "clean", findings: { missing: 0, stored_twice: 0 } });
      const t = `${n.database}.${n.table}`;
      await ch.command({ query: `INSERT INTO ${t} SELECT * FROM ${t} WHERE kafka_partition = 1 AND kafka_offset = 3` });
      const s = await statsWhen(w, (s) => s.last_audit?.result === "failed", 30_000, "the duplicate found");
      expect(s.last_audit.findings).toEqual({ missing: 0, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 });
      const metrics = await (await fetch(`${w.statsUrl}/metrics`)).text();
      expect(metrics).toContain('cdr_worker_audit_findings{finding="stored_twice"} 1');
      expect(metrics).toMatch(/cdr_worker_audit_runs_total\{result="failed"\} [1-9]/);
      expect(w.logs.some((l) => l.includes("scheduled audit found records missing or delivered twice"))).toBe(true);
    } finally {
      expect(await w.stop()).toBe(0);
    }
  });
});
