/**
 * The shared frame of an end-to-end test file: a ClickHouse client, fresh names per test, and an
 * afterAll that kills leftover workers, deletes the file's topics, drops its tables and closes the
 * client (a developer running the suite again and again should not grow ClickHouse and Kafka).
 */
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
    // The table, and its offsets table and the view that keeps it (sql/001_cdr.sql).
    for (const t of tables)
      for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await ch.command({ query: `DROP TABLE IF EXISTS ${name}` }).catch(() => {});
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
      const rs = await ch.query({ query: `SELECT uniqExact(cdr_id) AS c FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
      return Number((await rs.json<{ c: string }>())[0]!.c);
    },
  };
}
