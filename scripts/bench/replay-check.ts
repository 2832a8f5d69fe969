/**
 * What the replay check costs on a big table, on each server: a table of the project's DDL filled
 * with ROWS rows (INSERT … SELECT from numbers(), so its view fills the offsets table too), 3 Kafka
 * partitions, each row ingested a second after the one before. Then the check, as the worker runs
 * it (ClickHouseWriter.storedOffsets), with its commit at each partition's end (an empty range) and
 * PAST rows before the end (PAST/3 a partition): its time (best of 3) and the rows the server read
 * (the server's query log; the 26.9 engine keeps none). Beside it, the same question asked of the
 * table itself, as a check without the offsets table must ask it (no key to use): time, rows read.
 * session_start_time spreads over the last 12 whole months (12 monthly partitions). Last, a lost
 * answer's read (ClickHouseWriter.storedRows) of a batch of BATCH rows of one partition with one row
 * at epoch_start 0 beside them: its time, and the rows it found.
 * Usage: bun scripts/bench/replay-check.ts [rows=100000000] [past=1000000]
 *        (services running: ClickHouse 18.16 on CLICKHOUSE_URL, the 26.9 engine on CLICKHOUSE_CURRENT_URL)
 */
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";

const ROWS = Number(process.argv[2] ?? 100_000_000);
const PAST = Number(process.argv[3] ?? 1_000_000);
const PARTITIONS = 3;
const SERVERS = [
  ["ClickHouse 18.16", process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123"],
  ["ClickHouse 26.9 engine", process.env.CLICKHOUSE_CURRENT_URL ?? "http://127.0.0.1:8127"],
] as const;
const T0 = Math.floor(Date.now() / 1000) - ROWS - 3600;
const BATCH = 10_000;
// The last 12 whole months, in seconds: row n starts at S0 + floor(n × SPAN / ROWS).
const today = new Date();
const S0 = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 12, 1) / 1000;
const SPAN = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1) / 1000 - S0;
const startOf = (n: number) => S0 + Math.floor((n * SPAN) / ROWS);

for (const [name, url] of SERVERS) {
  const table = `replay_check_${process.pid}`;
  const ch = createClickHouse({ url, user: "default", password: "", database: "default", table, requestTimeoutMs: 3_600_000 }, "default");
  try {
    await migrate(ch, "bench", table);
    const fillStart = performance.now();
    // Offsets per partition 0 … ROWS/3 − 1; ingested_at one second apart; session_start_time over
    // 12 months. n × SPAN stays below 2^63 for any ROWS here.
    await ch.command({
      query:
        `INSERT INTO bench.${table} (cdr_id, raw_id, device_id, msisdn, service_type, radio_access_type, cell_id, ` +
        "session_start_time, session_end_time, duration_seconds, up_bytes, down_bytes, total_bytes, source_ip, " +
        "ingested_at, kafka_partition, kafka_offset) " +
        `SELECT generateUUIDv4(), toString(number), concat('dev-', toString(number % 100000)), ` +
        `concat('+1555', toString(1000000 + number % 9000000)), 'data', 'LTE_4G', toString(number % 5000), ` +
        `toDateTime(${S0} + intDiv(number * ${SPAN}, ${ROWS})), toDateTime(${S0} + intDiv(number * ${SPAN}, ${ROWS}) + 60), ` +
        `60, number, number, 2 * number, 167772161, ` +
        `toDateTime(${T0} + number), toInt32(number % ${PARTITIONS}), toInt64(intDiv(number, ${PARTITIONS})) ` +
        `FROM numbers(${ROWS})`,
    });
    const fillS = (performance.now() - fillStart) / 1000;
    const end = Math.ceil(ROWS / PARTITIONS);
    const writer = new ClickHouseWriter(ch, "bench", table, { requestTimeoutMs: 600_000 });
    const lastAt = (T0 + ROWS) * 1000;
    const results: Record<string, unknown> = { server: name, rows: ROWS, fill_s: Number(fillS.toFixed(1)) };
    for (const [label, back] of [["empty", 0], ["past_1e6", Math.floor(PAST / PARTITIONS)]] as const) {
      const owned = Array.from({ length: PARTITIONS }, (_, partition) => ({
        partition,
        from: end - back,
        // The commit's time: when its offset was ingested (a minute back is the check's own margin).
        since: lastAt - back * PARTITIONS * 1000 - 1000,
      }));
      let best = Infinity;
      let found = 0;
      for (let i = 0; i < 3; i++) {
        const t = performance.now();
        const r = await writer.storedOffsets(owned);
        best = Math.min(best, performance.now() - t);
        found = [...r.values()].reduce((n, l) => n + l.length, 0);
      }
      const where = owned.map((o) => `(kafka_partition = ${o.partition} AND kafka_offset >= ${o.from})`).join(" OR ");
      // Rows the server read, from its query log (18.16); the 26.9 engine keeps none (null there).
      const readRows = async (query: string) => {
        const id = `replay-check-bench-${crypto.randomUUID()}`;
        const t = performance.now();
        await (await ch.query({ query, query_id: id, format: "TabSeparated", clickhouse_settings: { log_queries: 1 } })).text();
        const ms = performance.now() - t;
        const rows = await ch
          .command({ query: "SYSTEM FLUSH LOGS" })
          .then(() => ch.query({ query: `SELECT read_rows FROM system.query_log WHERE query_id = '${id}' AND type = 2`, format: "TabSeparated" }))
          .then((r) => r.text())
          .then((t) => (t.trim() ? Number(t.trim()) : null), () => null);
        return { rows, ms };
      };
      const viaOffsets = await readRows(`SELECT kafka_partition, kafka_offset FROM bench.${table}_offsets WHERE ${where}`);
      const whole = await readRows(`SELECT kafka_partition, kafka_offset FROM bench.${table} WHERE ${where}`);
      results[label] = {
        check_ms: Number(best.toFixed(1)),
        offsets_found: found,
        offsets_table_rows_read: viaOffsets.rows,
        whole_table_ms: Number(whole.ms.toFixed(1)),
        whole_table_rows_read: whole.rows,
      };
    }
    // A lost answer's read: the last BATCH offsets of partition 0, their seconds, and epoch_start 0.
    const offsets = Array.from({ length: BATCH }, (_, i) => end - BATCH + i);
    const starts = [0, ...offsets.map((o) => startOf(o * PARTITIONS))];
    let bestLookup = Infinity;
    let stored = 0;
    for (let i = 0; i < 3; i++) {
      const t = performance.now();
      const found = await writer.storedRows({ partitions: [0], minOffset: offsets[0]!, maxOffset: end - 1, starts });
      bestLookup = Math.min(bestLookup, performance.now() - t);
      stored = found.size;
    }
    results.lost_answer_read = { rows: BATCH, with_epoch_start_0: true, ms: Number(bestLookup.toFixed(1)), found: stored };
    console.log(JSON.stringify(results));
  } finally {
    for (const t of [`${table}_offsets_mv`, `${table}_offsets`, table])
      await ch.command({ query: `DROP TABLE IF EXISTS bench.${t}` }).catch(() => {});
    await ch.close();
  }
}
