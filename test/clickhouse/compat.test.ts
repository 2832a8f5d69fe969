// The storage contract, on both ends of the supported range: the project's DDL (sql/), the exact
// insert body the worker's encoder writes, and the README's queries, on the real ClickHouse 18.16
// that .ci/run starts and on the current engine (chdb-core 26.9, in-process). Every column of
// every edge record is read back and compared with the source record.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { ddlStatements, migrate } from "../../src/clickhouse/migrate.ts";
import { RowBuffer } from "../../src/clickhouse/row-encoder.ts";
import { COLUMNS } from "../../src/clickhouse/row-format.ts";
import { ClickHouseWriter, INSERT_SETTINGS } from "../../src/clickhouse/writer.ts";
import { expectCorpus, readBack, storageCorpus, utcText } from "../fixtures/storage-corpus.ts";
import { chdb, type ChdbResult } from "../support/chdb.ts";
import { CLICKHOUSE_URL, ROOT, uniqueName } from "../support/services.ts";

const INGESTED_AT = 1_700_000_123;
const corpus = storageCorpus(INGESTED_AT);
const DB = "compat";
const table = uniqueName("cdr").replace(/\W/g, "_");
const chdbPath = `${ROOT}/.local/tmp/${uniqueName("chdb")}`;
const bodyFile = `${chdbPath}.tsv`;

/** The README's ```sql examples, pointed at the test table. */
const readmeQueries = async () =>
  [...(await Bun.file(`${ROOT}/README.md`).text()).matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim().replace(/;$/, "").replaceAll("telecom.cdr", `${DB}.${table}`));

/** The worker's exact insert body for the whole corpus. */
function encodeCorpus(): Uint8Array {
  const ctx = { phone: new PhoneNormalizer() };
  const buf = new RowBuffer();
  for (const r of corpus) {
    const d = decode(r.text, ctx);
    if (!d.ok) throw new Error(`corpus record refused by the decoder: ${JSON.stringify(d.rejection)}`);
    buf.add(d.row, INGESTED_AT);
  }
  return buf.bytes().slice();
}

const jsonRows = (text: string) => text.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, string>);

const body = encodeCorpus();
const insertSql = (t: string, settings: Record<string, string>) => {
  const s = Object.entries(settings).map(([k, v]) => `${k}='${v}'`).join(", ");
  return `INSERT INTO ${t} (${COLUMNS.join(", ")}) FROM INFILE '${bodyFile}'${s ? ` SETTINGS ${s}` : ""} FORMAT TabSeparated`;
};
const ok = (r: ChdbResult | undefined, what: string): string => {
  if (!r?.ok) throw new Error(`${what} failed on the current engine: ${r ? r.error : "no result"}`);
  return r.output;
};

beforeAll(() => {
  mkdirSync(`${ROOT}/.local/tmp`, { recursive: true });
  writeFileSync(bodyFile, body);
});
const ch = createClickHouse({ url: CLICKHOUSE_URL, user: "default", password: "", database: "default", table, requestTimeoutMs: 30_000 }, "default");
afterAll(async () => {
  rmSync(chdbPath, { recursive: true, force: true });
  rmSync(bodyFile, { force: true });
  await ch.command({ query: `DROP TABLE IF EXISTS ${DB}.${table}` }).catch(() => {});
  await ch.close();
});

/** TabSeparated lines, sorted: engines may order unordered results differently (TSV keeps UInt64 exact). */
const lines = (tsv: string) => tsv.split("\n").filter(Boolean).sort();

test("the corpus covers every edge the contract names", () => {
  const e = corpus.map((r) => r.expect);
  for (let d = 1; d <= 10; d++) expect(e.some((x) => x.session_start_time!.length === d)).toBe(true);
  for (const v of ["0", "2147483648", "4294967295"]) expect(e.some((x) => x.session_end_time === v)).toBe(true);
  expect(e.some((x) => x.total_bytes === "18446744073709551615")).toBe(true);
  for (const c of ["\t", "\n", "\r", "\\", "\0"]) expect(e.some((x) => x.device_id!.includes(c) && x.service_type !== undefined)).toBe(true);
  expect(e.some((x) => /\p{Extended_Pictographic}/u.test(x.raw_id!))).toBe(true);
  expect(e.some((x) => x.device_id!.length >= 10_000)).toBe(true);
  expect(new Set(e.map((x) => x.radio_access_type))).toEqual(new Set(["3G", "LTE_4G", "5G_NR"]));
});

describe("ClickHouse 18.16 (the server .ci/run starts)", () => {
  test("the project's DDL applies, the worker's insert body round-trips every column exactly", async () => {
    await migrate(ch, DB, table);
    await migrate(ch, DB, table); // idempotent
    await new ClickHouseWriter(ch, DB, table).insert(body, corpus.length);
    const rs = await ch.query({ query: readBack(`${DB}.${table}`).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" });
    expectCorpus(await rs.json<Record<string, string>>(), corpus);
  });

  test("the README's example queries run", async () => {
    const queries = await readmeQueries();
    expect(queries.length).toBeGreaterThanOrEqual(2);
    for (const q of queries) await (await ch.query({ query: q, format: "JSONEachRow" })).json();
  });
});

describe("current ClickHouse (chdb-core 26.9, ClickHouse's own engine in-process)", () => {
  test("the project's DDL applies, the worker's insert body round-trips every column exactly, whatever date_time_input_format says", async () => {
    const t = `${DB}.${table}`;
    const tDefault = `${DB}.${table}_default`;
    const ddl = [...ddlStatements(DB, table), ...ddlStatements(DB, `${table}_default`).slice(1)].map((sql) => ({ sql }));
    const { version, results } = await chdb(chdbPath, [
      ...ddl,
      { sql: insertSql(t, INSERT_SETTINGS) }, // what the worker sends
      { sql: insertSql(tDefault, {}) }, // the server's own default (best_effort since 26.5)
      { sql: readBack(t) },
      { sql: readBack(tDefault) },
      { sql: `SELECT raw_id, toString(session_start_time) AS start, toString(session_end_time) AS end FROM ${t} FORMAT JSONEachRow` },
    ]);
    expect(version).toMatch(/^26\.9\./);
    results.slice(0, ddl.length + 2).forEach((r, i) => ok(r, `step ${i + 1}`));
    const [pinned, byDefault, text] = results.slice(ddl.length + 2).map((r, i) => jsonRows(ok(r, `read-back ${i + 1}`)));
    expectCorpus(pinned!, corpus);
    expect(byDefault).toEqual(pinned!);
    // As text too: 0 → 1970-01-01 00:00:00 … 4294967295 → 2106-02-07 06:28:15.
    const want = new Map(corpus.map((r) => [r.expect.raw_id, r.expect]));
    for (const row of text!) {
      const e = want.get(row.raw_id!)!;
      expect([row.start, row.end]).toEqual([utcText(Number(e.session_start_time)), utcText(Number(e.session_end_time))]);
    }
    expect(text!.some((r) => r.end === "2106-02-07 06:28:15")).toBe(true);
    expect(text!.some((r) => r.start === "1970-01-01 00:00:00")).toBe(true);
  });

  test("the README's example queries run and answer as 18.16 does on the same rows", async () => {
    const queries = await readmeQueries();
    const { results } = await chdb(chdbPath, queries.map((q) => ({ sql: `${q} FORMAT TabSeparated` })));
    let answered = 0;
    for (const [i, q] of queries.entries()) {
      const current = lines(ok(results[i], `README query ${i + 1}`));
      const old = lines(await (await ch.query({ query: q, format: "TabSeparated" })).text());
      expect(current).toEqual(old);
      answered += current.length;
    }
    expect(answered).toBeGreaterThan(0);
  });
});
