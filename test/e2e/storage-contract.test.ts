// The storage contract through the whole worker (Kafka → decode → ClickHouse 18.16): every valid
// record at the edges of the rules lands exactly; a row ClickHouse refuses costs one DLQ envelope
// and no valid row.
import { describe, expect, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { ddlStatements } from "../../src/clickhouse/migrate.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { expectCorpus, readBack, storageCorpus } from "../fixtures/storage-corpus.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, consumeN, header, props, text, topicLength } from "../support/kafka.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

const { ch, names, distinctIds } = e2eScope();

async function produce(topic: string, values: string[], partition = 0): Promise<void> {
  const p = new Producer(props);
  try {
    await Promise.all(values.map((v) => p.produce(topic, v, { partition })));
  } finally {
    p.close();
  }
}

describe("Storage contract", () => {
  test("every edge record of the corpus is stored exactly through the whole worker, nothing in the DLQ", async () => {
    const n = await names("edges");
    const corpus = storageCorpus(0);
    const startedAt = Math.floor(Date.now() / 1000);
    await produce(n.raw, corpus.map((r) => r.text));
    const w = await startWorker(workerEnv(n));
    const s = await statsWhen(w, (s) => s.total_processed === corpus.length && s.partitions["0"]?.committed_offset === corpus.length, 30_000, "corpus processed");
    expect(await w.stop()).toBe(0);
    expect(s.total_dlq).toBe(0);
    expect(topicLength(n.dlq)).toBe(0);
    const rows = await (await ch.query({ query: readBack(`${n.database}.${n.table}`).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" })).json<Record<string, string>>();
    const endedAt = Math.floor(Date.now() / 1000);
    for (const r of rows) {
      expect(Number(r.ingested_at)).toBeGreaterThanOrEqual(startedAt);
      expect(Number(r.ingested_at)).toBeLessThanOrEqual(endedAt);
      r.ingested_at = "0";
    }
    expectCorpus(rows, corpus);
  }, 60_000);

  test("one row ClickHouse refuses in a full batch of 1000: only it reaches the DLQ, with its column, and every other row is inserted once", async () => {
    const n = await names("poison");
    // An operator's stricter column: service_type FixedString(8) refuses a longer service name.
    const table = `${n.database}.${n.table}`;
    await ch.command({ query: `DROP TABLE ${table}` });
    await ch.command({ query: ddlStatements(n.database, n.table)[1]!.replace(/service_type\s+String/, "service_type FixedString(8)") });
    const POISON = 613;
    const values = Array.from({ length: 1000 }, (_, i) => toJson(withFields({ raw_id: `p-${i}`, svc: i === POISON ? "streaming-video" : "data" })));
    await produce(n.raw, values);
    const w = await startWorker(workerEnv(n, { BATCH_SIZE: "1000", BATCH_FLUSH_INTERVAL_SECONDS: "30" }));
    const s = await statsWhen(w, (s) => s.total_processed === 1000 && s.partitions["0"]?.committed_offset === 1000, 30_000, "batch stored");
    expect(await w.stop()).toBe(0);
    expect(s).toMatchObject({ total_clickhouse: 999, total_dlq: 1, clickhouse_refused_rows: 1, clickhouse_exhausted_batches: 0, clickhouse_retries: 0 });
    expect(s.by_dlq_reason.normalization_error).toBe(1);
    expect(s.clickhouse_split_inserts).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(1000)) + 2);
    const counts = await (await ch.query({ query: `SELECT count() AS rows, uniqExact(raw_id) AS ids FROM ${table}`, format: "JSONEachRow" })).json<{ rows: string; ids: string }>();
    expect(counts.map((c) => [Number(c.rows), Number(c.ids)])).toEqual([[999, 999]]);
    const [dlq] = await consumeN(n.dlq, 1);
    const envelope = JSON.parse(text(dlq!));
    expect(envelope).toMatchObject({ failure_reason: "normalization_error", failed_field: "service_type", original_payload: { raw_id: `p-${POISON}`, svc: "streaming-video" } });
    expect(header(dlq!, HEADERS.sourceOffset)).toBe(String(POISON));
    expect(header(dlq!, HEADERS.detail)).toContain("FixedString(8)");
    expect(topicLength(n.dlq)).toBe(1);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(1000n);
    expect(await distinctIds(n)).toBe(999);
  }, 60_000);
});
