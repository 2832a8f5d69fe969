// The offsets table's retention (src/clickhouse/prune.ts): which monthly partitions are whole past
// the window, and `migrate --prune-offsets` dropping exactly those on 18.16 and the 26.9 engine.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { expiredMonths, expiredPartitions } from "../../src/clickhouse/prune.ts";
import { e2eScope } from "../support/e2e.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

test("a month goes only once its last day is past the window; the month in the window and the current one stay", () => {
  const now = new Date("2026-12-05T12:00:00Z");
  // 62 days before: 2026-10-04. September ended before it; October has rows inside it.
  expect(expiredMonths(["202608", "202609", "202610", "202611", "202612"], 62, now)).toEqual(["202608", "202609"]);
  expect(expiredMonths(["202611", "202612"], 7, now)).toEqual([]);
  expect(expiredMonths(["all", "2026", "tuple()"], 7, now)).toEqual([]); // not YYYYMM: left alone
});

test("a day goes only once it ended before the window (the DLQ table's daily partitions); months alike", () => {
  const now = new Date("2026-12-05T12:00:00Z");
  // 7 days before: 2026-11-28T12:00. The 27th ended before it; the 28th has rows inside it.
  expect(expiredPartitions(["20261126", "20261127", "20261128", "20261205"], 7, now)).toEqual(["20261126", "20261127"]);
  expect(expiredPartitions(["20261231", "202609", "20261301x"], 7, now)).toEqual(["202609"]);
});

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s", (_name, server) => {
  const scope = e2eScope(server.url);
  test("migrate --prune-offsets drops the expired months of the offsets table and keeps the rest; too short a window is refused", async () => {
    const n = await scope.names("prune");
    const ch = scope.ch;
    const offsets = `${n.database}.${n.table}_offsets`;
    const month = (d: Date) => d.toISOString().slice(0, 7).replace("-", "");
    const now = new Date();
    const old = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 6, 15));
    const rows = [
      { kafka_partition: 0, kafka_offset: 1, cdr_id: "00000000-0000-5000-8000-000000000001", ingested_at: old.toISOString().slice(0, 19).replace("T", " ") },
      { kafka_partition: 0, kafka_offset: 2, cdr_id: "00000000-0000-5000-8000-000000000002", ingested_at: now.toISOString().slice(0, 19).replace("T", " ") },
    ];
    await ch.insert({ table: offsets, values: rows, format: "JSONEachRow" });
    const cli = (...args: string[]) => {
      const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "migrate", ...args], { env: { ...workerEnv(n), LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
      return { code: p.exitCode, out: `${p.stdout}`.trim(), err: `${p.stderr}`.trim() };
    };
    expect(cli("--prune-offsets", "--keep-days", "3")).toMatchObject({ code: 2, err: expect.stringContaining("--keep-days") });
    const pruned = cli("--prune-offsets");
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.out)).toEqual({ table: offsets, keep_days: 62, pruned: [month(old)] });
    const left = await (await ch.query({ query: `SELECT count() AS c, uniqExact(kafka_offset) AS u, max(kafka_offset) AS m FROM ${offsets}`, format: "JSONEachRow" })).json<{ c: string; u: string; m: string }>();
    expect(left.map((r) => [Number(r.c), Number(r.u), Number(r.m)])).toEqual([[1, 1, 2]]);
    // Again: nothing more to drop.
    expect(JSON.parse(cli("--prune-offsets").out).pruned).toEqual([]);
  });
});
