// The storage contract, on both ends of the supported range, over the worker's own HTTP path: the
// project's DDL (sql/) through `migrate`, the exact RowBinary body the worker's encoder writes
// through ClickHouseWriter (and the TSV reference's body), and the example queries of docs/table.md, on the real ClickHouse 18.16 that .ci/run starts and
// on the test endpoint around ClickHouse 26.9's engine. Every column of every edge record is read
// back and compared with the source record.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Readable } from "node:stream";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { checkSchema, COLUMN_TYPES, ddlStatements, migrate } from "../../src/clickhouse/migrate.ts";
import { checkGrants } from "../../src/clickhouse/grants.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { RowBuffer } from "../../src/clickhouse/row-encoder.ts";
import { COLUMNS } from "../../src/clickhouse/row-format.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { expectCorpus, readBack, storageCorpus, utcText } from "../fixtures/storage-corpus.ts";
import { CLICKHOUSE_SERVERS, ROOT, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const INGESTED_AT = 1_700_000_123;
const corpus = storageCorpus(INGESTED_AT);
const DB = "compat";
const table = uniqueName("cdr").replace(/\W/g, "_");

/** docs/table.md's ```sql examples, pointed at the test table. */
const readmeQueries = async () =>
  [...(await Bun.file(`${ROOT}/docs/table.md`).text()).matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim().replace(/;$/, "").replaceAll("telecom.cdr", `${DB}.${table}`));

/** Each corpus record's Kafka partition and offset: Int32 and Int64 edges, beyond 2^32 and up to 2^53. */
const provenance = (i: number): [number, number] =>
  i === 0 ? [2147483647, Number.MAX_SAFE_INTEGER] : i === 1 ? [0, 0] : [i % 7, 2 ** 32 + i];

/** The worker's exact insert body for the whole corpus (RowBinary), or the TSV reference's. */
function encodeCorpus(buf: RowBinaryBuffer | RowBuffer): Uint8Array {
  const ctx = { phone: new PhoneNormalizer() };
  corpus.forEach((r, i) => {
    const d = decode(r.text, ctx);
    if (!d.ok) throw new Error(`corpus record refused by the decoder: ${JSON.stringify(d.rejection)}`);
    buf.add(d.row, INGESTED_AT, ...provenance(i));
  });
  return buf.bytes().slice();
}
const body = encodeCorpus(new RowBinaryBuffer());
const tsvBody = encodeCorpus(new RowBuffer());

const clients = CLICKHOUSE_SERVERS.map((s) => createClickHouse({ url: s.url, user: "default", password: "", database: "default", table, requestTimeoutMs: 30_000 }, "default"));
afterAll(async () => {
  for (const ch of clients) {
    for (const t of [table, `${table}_default`, `${table}_tsv`, `${table}_old`])
      for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await ch.command({ query: `DROP TABLE IF EXISTS ${DB}.${name}` }).catch(() => {});
    await ch.close();
  }
});

/** TabSeparated lines, sorted: engines may order unordered results differently (TSV keeps UInt64 exact). */
const lines = (tsv: string) => tsv.split("\n").filter(Boolean).sort();

test("the schema check's column types are the encoder's columns, in its order", () => {
  expect([...COLUMN_TYPES.keys()]).toEqual([...COLUMNS]);
});

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

describe.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s", (_name, server, i) => {
  const ch = clients[i]!;
  const t = `${DB}.${table}`;

  test("migrate applies the project's DDL (twice: idempotent); the writer's body round-trips every column exactly, as unix seconds and as text", async () => {
    await migrate(ch, DB, table);
    await migrate(ch, DB, table);
    // The table migrate made is one the worker's binary body fits exactly, as the server describes it.
    await checkSchema(ch, DB, table);
    const w = new ClickHouseWriter(ch, DB, table);
    await w.insert(body, corpus.length);
    expect(w.endpoints[0]!.version).toMatch(server.version);
    const rows = await (await ch.query({ query: readBack(t).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" })).json<Record<string, string>>();
    expectCorpus(rows, corpus);
    // The provenance of each row, as text (Int64 beyond 2^53 would not survive JSON numbers).
    const kafka = await (await ch.query({ query: `SELECT raw_id, toString(kafka_partition) AS p, toString(kafka_offset) AS o FROM ${t}`, format: "JSONEachRow" })).json<Record<string, string>>();
    const byRaw = new Map(kafka.map((r) => [r.raw_id, [r.p, r.o]]));
    expect(corpus.map((r, i) => byRaw.get(r.expect.raw_id!))).toEqual(corpus.map((_, i) => provenance(i).map(String)));
    // As text too: 0 → 1970-01-01 00:00:00 … 4294967295 → 2106-02-07 06:28:15. 18.16 writes the
    // zero DateTime as 0000-00-00 00:00:00 and its date table ends with 2105, so its text is
    // compared up to 2105-12-31; the stored values are exact on both, as the unix seconds above show.
    const old = server.version.test("18.16.");
    const zero = old ? "0000-00-00 00:00:00" : "1970-01-01 00:00:00";
    const LAST_18_16_TEXT = 4_291_747_199; // 2105-12-31 23:59:59
    const asText = (s: number, got: string) => (old && s > LAST_18_16_TEXT ? got : s === 0 ? zero : utcText(s));
    const text = await (await ch.query({ query: `SELECT raw_id, toString(session_start_time) AS start, toString(session_end_time) AS end FROM ${t}`, format: "JSONEachRow" })).json<Record<string, string>>();
    const want = new Map(corpus.map((r) => [r.expect.raw_id, r.expect]));
    for (const row of text) {
      const e = want.get(row.raw_id!)!;
      expect([row.start, row.end]).toEqual([asText(Number(e.session_start_time), row.start!), asText(Number(e.session_end_time), row.end!)]);
    }
    if (!old) expect(text.some((r) => r.end === "2106-02-07 06:28:15")).toBe(true);
    expect(text.some((r) => r.start === zero)).toBe(true);
    expect(text.some((r) => r.start === "1970-01-01 00:00:01")).toBe(true);
  });

  test("migrate upgrades a table of the older DDL in place: the provenance columns are added, -1 in the rows it held; twice without harm", async () => {
    const old = `${table}_old`;
    for (const q of ddlStatements(DB, old).filter((q) => !q.includes("_offsets"))) await ch.command({ query: q.replace(/,\s*kafka_partition[^\n]*\n\s*kafka_offset[^\n]*/, "") });
    await expect(checkSchema(ch, DB, old)).rejects.toThrow("column kafka_partition is missing; the worker writes it as Int32 (sql/001_cdr.sql): run `cdr-worker migrate`, which adds it");
    await ch.command({ query: `INSERT INTO ${DB}.${old} (${COLUMNS.slice(0, 15).join(", ")}) SELECT ${COLUMNS.slice(0, 15).join(", ")} FROM ${t} LIMIT 3` });
    expect(await migrate(ch, DB, old)).toEqual([`${DB}.${old}.kafka_partition`, `${DB}.${old}.kafka_offset`]);
    expect(await migrate(ch, DB, old)).toEqual([]);
    await checkSchema(ch, DB, old);
    const w = new ClickHouseWriter(ch, DB, old);
    await w.insert(body, corpus.length);
    const split = await (await ch.query({ query: `SELECT kafka_offset = -1 AND kafka_partition = -1 AS before, count() AS c FROM ${DB}.${old} GROUP BY before ORDER BY before`, format: "JSONEachRow" })).json<{ before: number; c: string }>();
    expect(split.map((r) => [Number(r.before), Number(r.c)])).toEqual([[0, corpus.length], [1, 3]]);
    await ch.command({ query: `DROP TABLE ${DB}.${old}` });
  });

  test("a table without its offsets table (0.2.0's DDL): run refuses, naming it; migrate makes it, fills it from the rows stored, then keeps it", async () => {
    const prev = `${table}_prev`;
    for (const q of ddlStatements(DB, prev).filter((q) => !q.includes("_offsets"))) await ch.command({ query: q });
    await expect(checkSchema(ch, DB, prev)).rejects.toThrow(
      `table ${DB}.${prev}_offsets does not exist (the replay check reads the stored offsets there); run \`cdr-worker migrate\``,
    );
    const cols = COLUMNS.slice(0, 15).join(", ");
    await ch.command({ query: `INSERT INTO ${DB}.${prev} (${cols}, kafka_partition, kafka_offset) SELECT ${cols}, 2, 7 FROM ${t} LIMIT 1` });
    await ch.command({ query: `INSERT INTO ${DB}.${prev} (${cols}) SELECT ${cols} FROM ${t} LIMIT 1` }); // before provenance: -1
    await migrate(ch, DB, prev);
    await migrate(ch, DB, prev);
    await checkSchema(ch, DB, prev);
    const w = new ClickHouseWriter(ch, DB, prev);
    await w.insert(body, corpus.length);
    const offsets = await (await ch.query({ query: `SELECT kafka_partition AS p, count() AS c FROM ${DB}.${prev}_offsets GROUP BY p ORDER BY p`, format: "JSONEachRow" })).json<{ p: number; c: string }>();
    // The one row stored before, once (a second migrate fills nothing), and every row inserted since.
    const total = offsets.reduce((n, r) => n + Number(r.c), 0);
    expect(total).toBe(1 + corpus.length);
    for (const name of [`${prev}_offsets_mv`, `${prev}_offsets`, prev]) await ch.command({ query: `DROP TABLE ${DB}.${name}` });
  });

  test("tables of 0.3.0's DDL (no DLQ table): run starts on them as they are; migrate makes the DLQ table and leaves the rest, offsets included", async () => {
    const v3 = `${table}_v3`;
    for (const q of ddlStatements(DB, v3)) await ch.command({ query: q });
    const cols = COLUMNS.slice(0, 15).join(", ");
    await ch.command({ query: `INSERT INTO ${DB}.${v3} (${cols}, kafka_partition, kafka_offset) SELECT ${cols}, 1, 9 FROM ${t} LIMIT 1` });
    // The ingesting worker needs no DLQ table (dlq fill does): a rolling upgrade starts before migrate.
    await checkGrants(ch, "default", DB, v3);
    await checkSchema(ch, DB, v3);
    expect(await migrate(ch, DB, v3)).toEqual([]);
    await checkGrants(ch, "default", DB, v3);
    await checkSchema(ch, DB, v3);
    // The offsets table 0.3.0 kept is whole already: no backfill, no progress table.
    const exists = async (name: string) => (await (await ch.query({ query: `EXISTS TABLE ${DB}.${name}`, format: "TabSeparated" })).text()).trim();
    expect([await exists(`${v3}_dlq`), await exists(`${v3}_offsets_backfill`)]).toEqual(["1", "0"]);
    const offsets = await (await ch.query({ query: `SELECT count() AS c FROM ${DB}.${v3}_offsets`, format: "JSONEachRow" })).json<{ c: string }>();
    expect(Number(offsets[0]!.c)).toBe(1);
    for (const name of [`${v3}_dlq_summary`, `${v3}_dlq`, `${v3}_offsets_mv`, `${v3}_offsets`, v3]) await ch.command({ query: `DROP TABLE ${DB}.${name}` });
  });

  test("the body means the same under the server's own defaults (no settings sent): nothing depends on input settings", async () => {
    await migrate(ch, DB, `${table}_default`);
    await ch.exec({
      query: `INSERT INTO ${t}_default (${COLUMNS.join(", ")}) FORMAT RowBinary`,
      values: Readable.from([Buffer.from(body)], { objectMode: false }),
    }).then((r) => r.stream.resume());
    const q = (x: string) => ch.query({ query: readBack(x).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" }).then((r) => r.json<Record<string, string>>());
    const byDefault = await q(`${t}_default`);
    expectCorpus(byDefault, corpus);
  });

  test("the TSV reference encoder's body stores the same values, read with date_time_input_format=basic", async () => {
    await migrate(ch, DB, `${table}_tsv`);
    await ch.exec({
      query: `INSERT INTO ${t}_tsv (${COLUMNS.join(", ")}) FORMAT TabSeparated`,
      values: Readable.from([Buffer.from(tsvBody)], { objectMode: false }),
      clickhouse_settings: { date_time_input_format: "basic" },
    }).then((r) => r.stream.resume());
    const rows = await (await ch.query({ query: readBack(`${t}_tsv`).replace(/ FORMAT JSONEachRow$/, ""), format: "JSONEachRow" })).json<Record<string, string>>();
    expectCorpus(rows, corpus);
  });
});

describe("every supported server", () => {
  test("the manual's example queries (docs/table.md) run and answer as on every other supported server", async () => {
    const queries = await readmeQueries();
    expect(queries.length).toBeGreaterThanOrEqual(2);
    let answered = 0;
    for (const q of queries) {
      const answers = await Promise.all(clients.map(async (c) => lines(await (await c.query({ query: q, format: "TabSeparated" })).text())));
      for (const a of answers.slice(1)) expect(a).toEqual(answers[0]!);
      answered += answers[0]!.length;
    }
    expect(answered).toBeGreaterThan(0);
  });
});
