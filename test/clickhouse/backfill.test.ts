// The offsets table filled from the rows stored before it existed (src/clickhouse/backfill.ts), on
// ClickHouse 18.16 and the 26.9 engine: in bounded steps, and exact when a run is cut short, a step
// half-written, and migrate run again (count() beside distinct offsets).
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { e2eScope } from "../support/e2e.ts";
import { CLICKHOUSE_SERVERS } from "../support/services.ts";

setDefaultTimeout(60_000);

/** 60 rows over three months, 4 of them without provenance (kafka_offset -1, an older release's). */
const ROWS = Array.from({ length: 60 }, (_, i) => ({
  cdr_id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
  raw_id: `b-${i}`,
  session_start_time: `2026-${String(9 + (i % 3)).padStart(2, "0")}-01 10:00:00`,
  ingested_at: "2026-12-01 10:00:00",
  kafka_partition: i % 3,
  kafka_offset: i < 4 ? -1 : i,
}));
const WITH_OFFSETS = ROWS.filter((r) => r.kafka_offset >= 0).length;

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s", (_name, server) => {
  const scope = e2eScope(server.url);

  /** A table whose rows were stored before its offsets table and view existed. */
  async function olderTable(prefix: string) {
    const n = await scope.names(prefix);
    const t = `${n.database}.${n.table}`;
    await scope.ch.command({ query: `DROP TABLE ${t}_offsets_mv` });
    await scope.ch.command({ query: `DROP TABLE ${t}_offsets` });
    await scope.ch.insert({ table: t, values: ROWS, format: "JSONEachRow" });
    return { n, t };
  }
  const offsetsCount = async (t: string) => {
    const q = `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${t}_offsets`;
    const [r] = await (await scope.ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
    return [Number(r!.rows), Number(r!.offsets)];
  };

  test("migrate fills a new offsets table in steps of a bounded size: every stored offset once, then the view", async () => {
    const { n, t } = await olderTable("backfill");
    const steps: string[] = [];
    await migrate(scope.ch, n.database, n.table, undefined, { stepRows: 7, beforeStep: (s) => void steps.push(s) });
    // Three months of 20 rows, slices of at most 7: three slices each.
    expect(steps).toHaveLength(9);
    expect(await offsetsCount(t)).toEqual([WITH_OFFSETS, WITH_OFFSETS]);
    // The view keeps it from now on; a re-run does nothing more.
    await migrate(scope.ch, n.database, n.table, undefined, { stepRows: 7, beforeStep: (s) => void steps.push(s) });
    expect(steps).toHaveLength(9);
    await scope.ch.insert({ table: t, values: [{ ...ROWS[10]!, cdr_id: "00000000-0000-4000-8000-000000000999", kafka_offset: 999 }], format: "JSONEachRow" });
    expect(await offsetsCount(t)).toEqual([WITH_OFFSETS + 1, WITH_OFFSETS + 1]);
  });

  test("a run cut short with a step half-written: the next run deletes that step's rows first and completes, each offset once", async () => {
    const { n, t } = await olderTable("backfill-cut");
    let seen = 0;
    let cutAt = "";
    const cut = migrate(scope.ch, n.database, n.table, undefined, {
      stepRows: 7,
      beforeStep: (s) => {
        if (++seen === 4) {
          cutAt = s;
          throw new Error("cut short");
        }
      },
    });
    expect(await cut.then(() => null, (e: Error) => e.message)).toBe("cut short");
    const [month, k, slices] = cutAt.split("/").map(Number);
    // What that step had written of its rows before it was cut short: a part of them.
    const where = `toYYYYMM(session_start_time) = ${month} AND kafka_offset >= 0 AND cityHash64(toString(cdr_id)) % ${slices} = ${k}`;
    await scope.ch.command({ query: `INSERT INTO ${t}_offsets SELECT kafka_partition, kafka_offset, cdr_id, ingested_at FROM ${t} WHERE ${where} LIMIT 2` });
    const [before] = await offsetsCount(t);
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(WITH_OFFSETS);
    const resumed: string[] = [];
    await migrate(scope.ch, n.database, n.table, undefined, { stepRows: 7, beforeStep: (s) => void resumed.push(s) });
    // From the step cut short on: the three done are not run again.
    expect(resumed[0]).toBe(cutAt);
    expect(resumed).toHaveLength(9 - 3);
    expect(await offsetsCount(t)).toEqual([WITH_OFFSETS, WITH_OFFSETS]);
  });
});
