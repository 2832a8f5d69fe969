/**
 * The DLQ table's rows as ClickHouse RowBinary, the columns of sql/002_dlq.sql in its order: the
 * filler's insert body. Nothing is escaped and nothing is parsed by the server, so no text a DLQ
 * record holds can make it refuse the row, and a row costs a few writes into one reused buffer
 * instead of a JSON text (JSON.stringify was the filler's largest cost an envelope).
 *
 * Read by position and width, the body is exact only against the columns below, so each column's
 * writer comes from its type in the SQL file (a type without one stops the module from loading),
 * and `dlq fill` checks the table's columns against them before it starts (migrate.ts
 * checkDlqSchema). test/clickhouse/dlq-table.test.ts reads every column back on both servers.
 *   Nullable(T)  a byte, 1 for NULL; else 0 and T
 *   DateTime     UInt32 seconds, from the row's "YYYY-MM-DD hh:mm:ss" text (UTC)
 *   UInt8, UInt32, Int32, Int64, String, UUID: clickhouse/binary-writer.ts
 * Each row is self-contained, so any run of rows is itself a valid body.
 */
import { BinaryWriter } from "../clickhouse/binary-writer.ts";
import { DLQ_COLUMNS } from "../clickhouse/migrate.ts";
import type { DlqRow } from "./row.ts";

type Write = (w: DlqRowBinary, v: unknown) => void;

/** The writer of a value of this column type. */
function writerOf(type: string): Write {
  const nullable = /^Nullable\((.+)\)$/.exec(type);
  if (nullable) {
    const inner = writerOf(nullable[1]!);
    return (w, v) => {
      w.byte(v === null ? 1 : 0);
      if (v !== null) inner(w, v);
    };
  }
  if (/^DateTime(\('[^']*'\))?$/.test(type)) {
    // Each DateTime column keeps its last text and seconds: a batch's rows share their stored_at,
    // and a worker's envelopes of one second their failed_at.
    const last = { text: "", seconds: 0 };
    return (w, v) => w.dateTime(v as string, last);
  }
  switch (type) {
    case "String":
      return (w, v) => w.text(v as string);
    case "UInt8":
      return (w, v) => w.byte(v as number);
    case "UInt32":
    case "Int32":
      return (w, v) => w.int32(v as number);
    case "Int64":
      return (w, v) => w.int64(v as number);
    case "UUID":
      return (w, v) => w.uuidText(v as string);
  }
  throw new Error(`sql/002_dlq.sql: column type ${type} has no RowBinary writer (src/dlq-table/row-binary.ts)`);
}

const COLUMNS = DLQ_COLUMNS.map((c) => ({ name: c.name as keyof DlqRow, write: writerOf(c.type) }));

/**
 * Every column but the texts at its widest (a UUID's 16 bytes and a null flag), each: the room kept
 * free before a row and after each text, which makes its own (BinaryWriter.string).
 */
const FIXED_BYTES = 17 * DLQ_COLUMNS.length;

/** The insert's column list: the body's order. */
export const DLQ_INSERT_COLUMNS = DLQ_COLUMNS.map((c) => c.name).join(", ");

const UINT32_MAX = 2 ** 32 - 1;

/**
 * The columns `add` writes, in its order, with the types it writes them as: the same as the SQL
 * file's, or the module does not load. Each value read by its own name: looking each up by the
 * column list's names cost the filler 0.6 µs a row (one lookup site for 23 names).
 */
const WRITTEN = [
  "failed_at DateTime('UTC')", "failure_reason String", "failed_field Nullable(String)", "stage String",
  "error_detail String", "attempts Nullable(UInt32)", "source_topic String", "source_partition Int32",
  "source_offset Int64", "dlq_partition Int32", "dlq_offset Int64", "worker_instance String",
  "payload_sha256 String", "mac_verified Nullable(UInt8)", "raw_id Nullable(String)", "cdr_id Nullable(UUID)",
  "device_id Nullable(String)", "caller_prefix Nullable(String)", "original_payload String",
  "payload_truncated UInt8", "payload_as_text String", "unreadable String", "stored_at DateTime('UTC')",
].join(", ");
if (WRITTEN !== DLQ_COLUMNS.map((c) => `${c.name} ${c.type}`).join(", "))
  throw new Error("sql/002_dlq.sql's columns are not the ones src/dlq-table/row-binary.ts writes");

/** Each DateTime column's last text and its seconds (DlqRowBinary.dateTime). */
const failedAtLast = { text: "", seconds: 0 };
const storedAtLast = { text: "", seconds: 0 };

export class DlqRowBinary extends BinaryWriter {
  /** Appends the row, each column written as its type in sql/002_dlq.sql says (WRITTEN). */
  add(row: DlqRow): void {
    this.reserve(FIXED_BYTES);
    this.dateTime(row.failed_at, failedAtLast);
    this.text(row.failure_reason);
    this.nullableText(row.failed_field);
    this.text(row.stage);
    this.text(row.error_detail);
    if (this.present(row.attempts)) this.int32(row.attempts!);
    this.text(row.source_topic);
    this.int32(row.source_partition);
    this.int64(row.source_offset);
    this.int32(row.dlq_partition);
    this.int64(row.dlq_offset);
    this.text(row.worker_instance);
    this.text(row.payload_sha256);
    if (this.present(row.mac_verified)) this.byte(row.mac_verified!);
    this.nullableText(row.raw_id);
    if (this.present(row.cdr_id)) this.uuidText(row.cdr_id!);
    this.nullableText(row.device_id);
    this.nullableText(row.caller_prefix);
    this.text(row.original_payload);
    this.byte(row.payload_truncated);
    this.text(row.payload_as_text);
    this.text(row.unreadable);
    this.dateTime(row.stored_at, storedAtLast);
  }

  /**
   * The reference: each column written by the writer its type in the SQL file names. `add` must
   * write the same bytes (test/dlq-table/row-binary.test.ts and the dlq-table-row fuzz target).
   */
  addByColumns(row: DlqRow): void {
    this.reserve(FIXED_BYTES);
    for (const c of COLUMNS) c.write(this, row[c.name]);
  }

  /** Nullable's flag: true (and 0 written) when a value follows, false (and 1) for NULL. */
  private present(v: unknown): boolean {
    this.buf[this.length++] = v === null ? 1 : 0;
    return v !== null;
  }

  private nullableText(s: string | null): void {
    if (this.present(s)) this.text(s!);
  }

  byte(v: number): void {
    this.buf[this.length++] = v;
  }

  int32(v: number): void {
    this.u32(v);
  }

  int64(v: number): void {
    this.i64(v);
  }

  text(s: string): void {
    this.string(s);
    this.reserve(FIXED_BYTES);
  }

  uuidText(s: string): void {
    this.uuid(s);
  }

  /**
   * A row's DateTime text (row.ts dateTimeText: UTC, within the type) as its seconds, 0 if
   * unreadable; `last` is the column's last text and its seconds.
   */
  dateTime(text: string, last: { text: string; seconds: number }): void {
    if (text !== last.text) {
      last.seconds = secondsOf(text);
      last.text = text;
    }
    this.u32(last.seconds);
  }
}

/** "YYYY-MM-DD hh:mm:ss" (UTC) as seconds within DateTime's range; 0 for any other text. */
function secondsOf(t: string): number {
  if (t.length !== 19) return 0;
  const v = [0, 0, 0, 0, 0, 0];
  // The six numbers' places; the separators between them are checked as they come.
  for (let i = 0, k = 0; i < 19; i++) {
    const c = t.charCodeAt(i);
    if (i === 4 || i === 7 || i === 10 || i === 13 || i === 16) {
      if (c !== SEPARATORS[k]) return 0;
      k++;
      continue;
    }
    if (c < 48 || c > 57) return 0;
    v[k] = v[k]! * 10 + (c - 48);
  }
  const ms = Date.UTC(v[0]!, v[1]! - 1, v[2]!, v[3]!, v[4]!, v[5]!);
  return Number.isFinite(ms) ? Math.min(UINT32_MAX, Math.max(0, ms / 1000)) : 0;
}

/** "-", "-", " ", ":", ":" as char codes: what stands between the six numbers. */
const SEPARATORS = [45, 45, 32, 58, 58];
