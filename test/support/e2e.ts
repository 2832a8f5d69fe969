/**
 * The shared frame of an end-to-end test file: a ClickHouse client, fresh names per test, and an
 * afterAll that kills leftover workers, deletes the file's topics, drops its tables and closes the
 * client (a developer running the suite again and again should not grow ClickHouse and Kafka).
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { afterAll } from "bun:test";
import { deleteTopics } from "./kafka.ts";
import { clickhouse, CLICKHOUSE_URL } from "./services.ts";
import { freshNames, killLeftoverWorkers, type Names } from "./worker.ts";

/** `clickhouseUrl`: the ClickHouse the file's tables live on (CLICKHOUSE_SERVERS names both). */
export function e2eScope(clickhouseUrl = CLICKHOUSE_URL) {
  const ch = clickhouse("default", clickhouseUrl);
  const topics: string[] = [];
  const tables: string[] = [];
  afterAll(async () => {
    killLeftoverWorkers();
    await deleteTopics(...topics).catch(() => {});
    // The table, its offsets table and the view that keeps it (sql/001_cdr.sql), the DLQ table and its view.
    for (const t of tables)
      for (const name of [`${t}_offsets_mv`, `${t}_offsets`, `${t}_offsets_backfill`, t, `${t}_dlq_summary`, `${t}_dlq`]) await ch.command({ query: `DROP TABLE IF EXISTS ${name}` }).catch(() => {});
    await ch.close();
  });
  return {
    ch,
    /** Fresh topics, group and table, cleaned up after the file. */
    async names(prefix: string): Promise<Names> {
      const n = await freshNames(prefix, clickhouseUrl);
      topics.push(n.raw, n.dlq);
      tables.push(`${n.database}.${n.table}`);
      return n;
    },
    /** Distinct cdr_id in a test's table. */
    async distinctIds(n: Names): Promise<number> {
      return (await storedCounts(ch, n)).ids;
    },
    /** Rows as billing counts them (count()) beside distinct cdr_id: equal unless a row is stored twice. */
    storedCounts: (n: Names) => storedCounts(ch, n),
  };
}

/**
 * Rows as billing counts them beside the distinct cdr_id. A merge of the ReplacingMergeTree may
 * collapse a duplicate before it is counted, so the offsets table (a plain MergeTree, one row per
 * stored record) is counted beside them: its rows equal its distinct offsets unless a record was
 * stored twice, merged or not.
 */
export async function storedCounts(
  ch: ClickHouseClient,
  n: { database: string; table: string },
): Promise<{ rows: number; ids: number; offsetRows: number; offsets: number }> {
  const q = async (query: string) => (await (await ch.query({ query, format: "JSONEachRow" })).json<Record<string, string>>())[0]!;
  const t = await q(`SELECT count() AS rows, uniqExact(cdr_id) AS ids FROM ${n.database}.${n.table}`);
  const o = await q(
    `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${n.database}.${n.table}_offsets`,
  );
  return { rows: Number(t.rows), ids: Number(t.ids), offsetRows: Number(o.rows), offsets: Number(o.offsets) };
}
