/**
 * The DLQ table's position read at scale: what `dlq fill` asks at each assignment and after a lost
 * answer (dlq-table/store.ts positions: each DLQ partition's largest stored offset). A DLQ table of
 * N rows (default 10^8; three DLQ partitions, two reasons, one day of `stored_at` a million rows)
 * is made on each server with INSERT … SELECT FROM numbers(), then the read runs five times: its
 * wall time on each server and whether its answer is right.
 * Usage: bun scripts/bench/dlq-position.ts [rows=100000000]   (services running; the tables are dropped after)
 */
import { ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { ClickHouseDlqStore } from "../../src/dlq-table/store.ts";

const N = Number(process.argv[2] ?? 100_000_000);
const SERVERS = [
  { name: "18.16", url: process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123" },
  { name: "26.9 engine", url: process.env.CLICKHOUSE_CURRENT_URL ?? "http://127.0.0.1:8127" },
];
const table = `dlqpos_${Date.now().toString(36)}`;

for (const server of SERVERS) {
  const ch = createClient({ url: server.url, request_timeout: 3_600_000, log: { level: ClickHouseLogLevel.OFF } });
  try {
    await ch.command({ query: "CREATE DATABASE IF NOT EXISTS bench" });
    await migrate(ch, "bench", table);
    const t0 = performance.now();
    // Offsets per partition ascend with stored_at, as a filler stores them; a day a million rows.
    const insert =
      `INSERT INTO bench.${table}_dlq (failure_reason, failed_at, dlq_partition, dlq_offset, stored_at) ` +
      `SELECT if(number % 2 = 0, 'malformed_json', 'invalid_rat_value'), ` +
      `toDateTime(1700000000 + intDiv(number, 12), 'UTC'), toInt32(number % 3), toInt64(intDiv(number, 3)), ` +
      `toDateTime(1700000000 + intDiv(number, 1000000) * 86400, 'UTC') FROM system.numbers LIMIT ${N}`;
    // A hundred days in one insert: 26.x limits the partitions an insert block may touch; 18.16
    // refuses settings it does not know, and has no such limit.
    const settings = server.name === "18.16" ? {} : { max_partitions_per_insert_block: "0" };
    await ch.command({ query: insert, clickhouse_settings: settings });
    const made = (performance.now() - t0) / 1000;
    const store = new ClickHouseDlqStore(ch, "bench", table);
    const expected = new Map([0, 1, 2].map((p) => [p, Math.floor((N - 1 - p) / 3)]));
    const times: number[] = [];
    let right = true;
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const got = await store.positions([0, 1, 2]);
      times.push(Math.round(performance.now() - t));
      right &&= [...expected].every(([p, o]) => got.get(p) === o);
    }
    console.log(JSON.stringify({ server: server.name, rows: N, made_s: Math.round(made), position_read_ms: times, right }));
  } finally {
    await ch.command({ query: `DROP TABLE IF EXISTS bench.${table}_dlq` }).catch(() => {});
    await ch.command({ query: `DROP TABLE IF EXISTS bench.${table}_dlq_summary` }).catch(() => {});
    await ch.command({ query: `DROP TABLE IF EXISTS bench.${table}` }).catch(() => {});
    await ch.close();
  }
}
