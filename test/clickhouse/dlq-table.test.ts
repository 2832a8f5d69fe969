// The DLQ table on ClickHouse 18.16 and the 26.9 engine: what the filler writes and reads back (rows
// of real envelopes, its position, the end of an insert), docs/dlq.md's four questions as written
// there, and `migrate --prune-dlq` dropping whole days.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { encodeEnvelope, provenanceHeaders, type DlqStage } from "../../src/dlq/envelope.ts";
import { checkDlqSchema, DLQ_COLUMNS } from "../../src/clickhouse/migrate.ts";
import { SchemaMismatchError } from "../../src/errors.ts";
import { dlqRow, dateTimeText, type DlqRow } from "../../src/dlq-table/row.ts";
import { parsePredicate, predicateSql } from "../../src/dlq-table/predicate.ts";
import { ClickHouseDlqStore, type DlqStore } from "../../src/dlq-table/store.ts";
import { DlqFiller } from "../../src/dlq-table/filler.ts";
import { FakeConsumer } from "../support/filler-consumer.ts";
import type { FailureReason } from "../../src/cdr/fields.ts";
import type { Message } from "../../src/kafka/message.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { workerEnv } from "../support/worker.ts";
import { HOSTILE_DLQ } from "../fixtures/hostile-dlq.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();

interface Fixture {
  reason: FailureReason;
  field: string | null;
  stage: DlqStage;
  payload: string;
  isObject: boolean;
  at: Date;
}

function message(f: Fixture, offset: number): Message {
  const value = enc.encode(encodeEnvelope({ reason: f.reason, field: f.field, payload: f.payload, payloadIsObject: f.isObject }, f.at, "w-1"));
  const headers = provenanceHeaders({ topic: "cdr.raw", partition: 2, offset: 1000 + offset, stage: f.stage, detail: "why", ...(f.stage === "clickhouse-failed" ? { attempts: 5 } : {}) });
  return { topic: "cdr.raw.dlq", partition: 0, offset, timestamp: -1, value, key: null, headers: headers.map(([k, v]) => [k, enc.encode(v)]) };
}

/** The SQL blocks of docs/dlq.md's table section, for `database`.`table`. */
function questions(database: string, table: string): string[] {
  const doc = readFileSync(`${ROOT}/docs/dlq.md`, "utf8");
  const section = doc.slice(doc.indexOf("## The DLQ as a table"));
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) =>
    m[1]!.replaceAll("telecom.cdr_dlq", `${database}.${table}_dlq`).replaceAll("telecom.cdr", `${database}.${table}`),
  );
}

/** Values as text: 18.16 quotes 64-bit integers in JSON, the 26.9 engine's endpoint does not. */
const texts = (rows: Array<Record<string, unknown>>) =>
  rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? null : String(v)])));

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s", (_name, server) => {
  const scope = e2eScope(server.url);

  test("the filler's rows, position and ended insert; docs/dlq.md's four questions answer as written", async () => {
    const n = await scope.names("dlqtable");
    const ch = scope.ch;
    const recent = new Date(Date.now() - 2 * 3600_000);
    const outage = new Date("2026-12-01T10:30:00Z");
    const fixtures: Fixture[] = [
      { reason: "malformed_json", field: null, stage: "decode", payload: '{"device_id":"dev-a","caller_num":"+447700900123",', isObject: false, at: recent },
      { reason: "malformed_json", field: null, stage: "decode", payload: '{"device_id":"dev-a","caller_num":"00447700900124" x', isObject: false, at: recent },
      { reason: "malformed_json", field: null, stage: "decode", payload: '{"device_id":"dev-b","caller_num":"+4915112345678"', isObject: false, at: recent },
      { reason: "malformed_json", field: null, stage: "decode", payload: "not even braces", isObject: false, at: recent },
      { reason: "invalid_rat_value", field: "rat", stage: "decode", payload: toJson(withFields({ raw_id: "q-rat-1", rat: 7 })), isObject: true, at: recent },
      { reason: "invalid_rat_value", field: "rat", stage: "decode", payload: toJson(withFields({ raw_id: "q-rat-2", rat: 8 })), isObject: true, at: recent },
      { reason: "normalization_error", field: null, stage: "clickhouse-failed", payload: toJson(withFields({ raw_id: "q-ch-1" })), isObject: true, at: outage },
      { reason: "normalization_error", field: null, stage: "clickhouse-failed", payload: toJson(withFields({ raw_id: "q-ch-2" })), isObject: true, at: outage },
    ];
    const store = new ClickHouseDlqStore(ch, n.database, n.table);
    expect(await store.positions([0, 1])).toEqual(new Map());
    const rows = fixtures.map((f, i) => dlqRow(message(f, i), { storedAt: Date.now() / 1000 }));
    await store.insert(rows.slice(0, 5), "cdr-dlq-fill:test:0:1", 10_000);
    expect(await store.positions([0, 1])).toEqual(new Map([[0, 4]]));
    await store.insert(rows.slice(5), "cdr-dlq-fill:test:0:2", 10_000);
    expect(await store.positions([0])).toEqual(new Map([[0, 7]]));
    await store.endInsert("cdr-dlq-fill:test:0:2"); // over already: ends at once
    // One of the replayed records has since been stored.
    const stored = dlqRow(message(fixtures[6]!, 6), { storedAt: 0 }).cdr_id!;
    await ch.insert({ table: `${n.database}.${n.table}`, values: [{ cdr_id: stored, raw_id: "q-ch-1", session_start_time: "2026-12-01 10:00:00", ingested_at: "2026-12-01 10:00:00" }], format: "JSONEachRow" });

    const read = texts(await (await ch.query({ query: `SELECT dlq_offset, failure_reason, stage, attempts, source_offset, device_id, caller_prefix, raw_id, cdr_id, failed_at FROM ${n.database}.${n.table}_dlq ORDER BY dlq_offset`, format: "JSONEachRow" })).json<Record<string, unknown>>());
    expect(read.map((r) => [r.dlq_offset, r.device_id, r.caller_prefix, r.raw_id])).toEqual([
      ["0", "dev-a", "+44", null],
      ["1", "dev-a", "+44", null],
      ["2", "dev-b", "+49", null],
      ["3", null, null, null],
      ["4", "356938035643809", "+49", "q-rat-1"],
      ["5", "356938035643809", "+49", "q-rat-2"],
      ["6", "356938035643809", "+49", "q-ch-1"],
      ["7", "356938035643809", "+49", "q-ch-2"],
    ]);
    expect(read[6]).toMatchObject({ stage: "clickhouse-failed", attempts: "5", source_offset: "1006", cdr_id: stored, failed_at: "2026-12-01 10:30:00" });

    const [byHour, sources, outageWindow, replayed] = questions(n.database, n.table);
    const ask = async (q: string) => texts(await (await ch.query({ query: q, format: "JSONEachRow" })).json<Record<string, unknown>>());
    const hour = dateTimeText(Math.floor(recent.getTime() / 3600_000) * 3600);
    expect(await ask(byHour!)).toEqual([
      { hour, failure_reason: "malformed_json", field: "", envelopes: "4" },
      { hour, failure_reason: "invalid_rat_value", field: "rat", envelopes: "2" },
    ]);
    const since = dateTimeText(Math.floor(recent.getTime() / 1000));
    expect(await ask(sources!)).toEqual([
      { device: "dev-a", prefix: "+44", envelopes: "2", since },
      { device: "(unreadable)", prefix: "(unreadable)", envelopes: "1", since },
      { device: "dev-b", prefix: "+49", envelopes: "1", since },
    ]);
    expect(await ask(outageWindow!)).toEqual([
      { stage: "clickhouse-failed", failure_reason: "normalization_error", envelopes: "2", first: "2026-12-01 10:30:00", last: "2026-12-01 10:30:00" },
    ]);
    expect(await ask(replayed!)).toEqual([
      { dlq_partition: "0", dlq_offset: "6", raw_id: "q-ch-1", stored: "1" },
      { dlq_partition: "0", dlq_offset: "7", raw_id: "q-ch-2", stored: "0" },
    ]);
  });

  // The filler's rows are RowBinary (src/dlq-table/row-binary.ts): every column read back as it was
  // written, at the edges of its type, nulls, text beyond ASCII and past a one-byte length.
  test("every column of the filler's binary rows reads back as written: edges, nulls, text beyond ASCII", async () => {
    const n = await scope.names("dlqbinary");
    const store = new ClickHouseDlqStore(scope.ch, n.database, n.table);
    const fixture: Fixture = { reason: "invalid_rat_value", field: "rat", stage: "decode", payload: toJson(withFields({ raw_id: "b-1", rat: 9 })), isObject: true, at: new Date("2026-12-01T10:30:00.250Z") };
    const base = dlqRow(message(fixture, 0), { storedAt: Date.now() / 1000 });
    const rows: DlqRow[] = [
      base,
      { ...base, dlq_offset: 1, failed_field: null, attempts: null, mac_verified: null, raw_id: null, cdr_id: null, device_id: null, caller_prefix: null, source_partition: -1, source_offset: -1 },
      { ...base, dlq_offset: 2, attempts: 2 ** 32 - 1, mac_verified: 1, source_partition: 2 ** 31 - 1, source_offset: Number.MAX_SAFE_INTEGER, failed_at: "2106-02-07 06:28:15", payload_truncated: 1 },
      { ...base, dlq_offset: 3, attempts: 0, mac_verified: 0, source_partition: -(2 ** 31), failed_at: "1970-01-01 00:00:00", error_detail: "Zürich 東京 \u{1F4DE} ".repeat(40), device_id: "é".repeat(200), failure_reason: "", original_payload: "x".repeat(127), payload_as_text: "nesting" },
      { ...base, dlq_partition: 0, dlq_offset: Number.MAX_SAFE_INTEGER, original_payload: "y".repeat(128), unreadable: "a; b", cdr_id: "ffffffff-ffff-5fff-bfff-ffffffffffff" },
    ];
    await store.insert(rows, "cdr-dlq-fill:test:binary", 10_000);
    // DateTimes as their seconds: 18.16 shows 0 as 0000-00-00 and cannot show past 2105.
    const times = DLQ_COLUMNS.filter((c) => c.type.startsWith("DateTime")).map((c) => c.name);
    const list = DLQ_COLUMNS.map((c) => (times.includes(c.name) ? `toUInt32(${c.name}) AS ${c.name}` : c.name)).join(", ");
    const read = texts(await (await scope.ch.query({ query: `SELECT ${list} FROM ${n.database}.${n.table}_dlq ORDER BY dlq_offset`, format: "JSONEachRow" })).json<Record<string, unknown>>());
    const seconds = (t: string) => Date.parse(`${t.replace(" ", "T")}Z`) / 1000;
    const want = rows.map((r) => ({ ...r, ...Object.fromEntries(times.map((c) => [c, seconds(r[c as keyof DlqRow] as string)])) }));
    expect(read).toEqual(texts(want));
    expect(read[2]!.failed_at).toBe(String(2 ** 32 - 1));
  });

  test("dlq fill's schema check: the table as migrate makes it passes; a retyped column is named with the type the filler writes; no table says run migrate", async () => {
    const n = await scope.names("dlqschema");
    await checkDlqSchema(scope.ch, n.database, n.table);
    await scope.ch.command({ query: `ALTER TABLE ${n.database}.${n.table}_dlq MODIFY COLUMN attempts Nullable(UInt64)` });
    const retyped = await checkDlqSchema(scope.ch, n.database, n.table).catch((e: Error) => e);
    expect(retyped).toBeInstanceOf(SchemaMismatchError);
    expect((retyped as Error).message).toBe(
      `schema error: ${n.database}.${n.table}_dlq: column attempts is Nullable(UInt64); the DLQ table's filler writes Nullable(UInt32), ` +
        "and a binary insert would store other values in it: make the column Nullable(UInt32) as in sql/002_dlq.sql",
    );
    const missing = await checkDlqSchema(scope.ch, n.database, "no_such").catch((e: Error) => e);
    expect((missing as Error).message).toBe(`table ${n.database}.no_such_dlq does not exist; run \`cdr-worker migrate\``);
  });

  test("migrate --prune-dlq drops the days stored before the window and keeps the rest", async () => {
    const n = await scope.names("dlqprune");
    const ch = scope.ch;
    const f: Fixture = { reason: "malformed_json", field: null, stage: "decode", payload: "x", isObject: false, at: new Date() };
    const old = Date.now() / 1000 - 30 * 86_400;
    const store = new ClickHouseDlqStore(ch, n.database, n.table);
    const oldRow = dlqRow(message(f, 0), { storedAt: old });
    await ch.insert({ table: `${n.database}.${n.table}_dlq`, values: [oldRow], format: "JSONEachRow" });
    await store.insert([dlqRow(message(f, 1), { storedAt: Date.now() / 1000 })], "cdr-dlq-fill:test:prune", 10_000);
    const cli = (...args: string[]) => {
      const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "migrate", ...args], { env: { ...workerEnv(n), LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
      return { code: p.exitCode, out: `${p.stdout}`.trim(), err: `${p.stderr}`.trim() };
    };
    // The DLQ topic keeps 7 days (topics ensure): the default window.
    const pruned = cli("--prune-dlq");
    expect({ code: pruned.code, err: pruned.err }).toEqual({ code: 0, err: "" });
    expect(JSON.parse(pruned.out)).toEqual({ table: `${n.database}.${n.table}_dlq`, keep_days: 7, pruned: [oldRow.stored_at.slice(0, 10).replaceAll("-", "")] });
    expect(await store.positions([0])).toEqual(new Map([[0, 1]]));
    expect(JSON.parse(cli("--prune-dlq", "--keep-days", "1").out).pruned).toEqual([]);
  });

  test("every hostile DLQ record becomes one row the server takes, the mended fields named (count() beside distinct offsets)", async () => {
    const n = await scope.names("dlqhostile");
    const store = new ClickHouseDlqStore(scope.ch, n.database, n.table);
    const rows = HOSTILE_DLQ.map((h) => dlqRow(h.message, { storedAt: Date.now() / 1000 }));
    await store.insert(rows, "cdr-dlq-fill:test:hostile", 10_000);
    const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${n.database}.${n.table}_dlq`;
    const [c] = await (await scope.ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
    expect([Number(c!.rows), Number(c!.offsets)]).toEqual([HOSTILE_DLQ.length, HOSTILE_DLQ.length]);
    const read = await (await scope.ch.query({ query: `SELECT dlq_offset, unreadable FROM ${n.database}.${n.table}_dlq ORDER BY dlq_offset`, format: "JSONEachRow" })).json<{ dlq_offset: string; unreadable: string }>();
    HOSTILE_DLQ.forEach((h, i) => expect(read[i]!.unreadable).toMatch(h.mended));
  });

  test("a row the server refuses alone is stored as a row that says so in its place; the rows around it as they are, each once", async () => {
    const n = await scope.names("dlqrefused");
    // Bytes the server really refuses in the record's row at offset 6 alone: its failed_at, then a
    // String said to be 2 GiB long (26.9: TOO_LARGE_STRING_SIZE; 18.16 tries to allocate it and
    // stops at its memory limit). No row the filler encodes is refused for its values: this stands
    // for what a server may still refuse of one row.
    const poisoned = (r: DlqRow) => r.dlq_offset === 6 && r.failure_reason !== "";
    const POISON = Uint8Array.of(0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x08);
    class PoisoningStore extends ClickHouseDlqStore {
      protected override encode(rows: readonly DlqRow[]): Uint8Array {
        const parts = rows.map((r) => (poisoned(r) ? POISON : Uint8Array.from(super.encode([r]))));
        return Buffer.concat(parts);
      }
    }
    const poisoning: DlqStore = new PoisoningStore(scope.ch, n.database, n.table);
    const fixture: Fixture = { reason: "invalid_rat_value", field: "rat", stage: "decode", payload: toJson(withFields({ rat: 9 })), isObject: true, at: new Date() };
    const consumer = new FakeConsumer();
    consumer.assigned = [[{ topic: "cdr.raw.dlq", partition: 0 }]];
    consumer.queue = Array.from({ length: 10 }, (_, o) => message(fixture, o));
    const filler = new DlqFiller(consumer, poisoning, {
      topic: "cdr.raw.dlq", batchRows: 10, batchBytes: 1 << 20, flushIntervalMs: 10, maxBufferedBytes: 1 << 20,
      requestTimeoutMs: 10_000, drainTimeoutMs: 10_000, lease: { sessionTimeoutMs: 45_000, rebalanceTimeoutMs: 300_000 }, row: {}, instance: "t",
    });
    const run = filler.run();
    const deadline = Date.now() + 30_000;
    while (filler.counts.stored < 10 && Date.now() < deadline) await Bun.sleep(20);
    filler.stop();
    await run;
    const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${n.database}.${n.table}_dlq`;
    const [c] = await (await scope.ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
    expect([Number(c!.rows), Number(c!.offsets)]).toEqual([10, 10]);
    const read = await (await scope.ch.query({
      query: `SELECT dlq_offset, failure_reason, unreadable, source_offset FROM ${n.database}.${n.table}_dlq ORDER BY dlq_offset`,
      format: "JSONEachRow",
    })).json<{ dlq_offset: string; failure_reason: string; unreadable: string; source_offset: string }>();
    expect(read.map((r) => r.failure_reason)).toEqual(Array.from({ length: 10 }, (_, o) => (o === 6 ? "" : "invalid_rat_value")));
    expect(read[6]!.unreadable).toStartWith("the server refused the row: DLQ table insert: ");
    expect(read[6]!.unreadable).toMatch(/Code: (131|241)|TOO_LARGE_STRING_SIZE|MEMORY_LIMIT_EXCEEDED/);
    expect(Number(read[6]!.source_offset)).toBe(1006); // where to find it upstream
    expect(read.filter((r) => r.unreadable !== "").length).toBe(1);
    expect(filler.counts.refused).toBe(1);
    // Halves in offset order: the commit never passed the refused row before it was stored.
    expect(consumer.commits.at(-1)?.offset).toBe(10n);
  });

  test("--where's number literals read as decimal: what 010 becomes equals 10 here, where 010 itself may not", async () => {
    const sql = predicateSql(parsePredicate("dlq_offset = 010"));
    const literal = /= (\S+)\)$/.exec(sql)![1]!;
    const [r] = await (await scope.ch.query({ query: `SELECT ${literal} = 10 AS decimal, 010 = 10 AS as_written`, format: "JSONEachRow" })).json<{ decimal: number; as_written: number }>();
    expect(Number(r!.decimal)).toBe(1);
    if (server.name.includes("18.16")) expect(Number(r!.as_written)).toBe(0); // octal: 8
  });
});
