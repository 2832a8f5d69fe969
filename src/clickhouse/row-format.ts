/**
 * CdrRow → one TabSeparated line: the readable reference of what a row holds. The worker inserts
 * RowBinary (row-binary.ts); test/clickhouse/row-binary.test.ts decodes that body and compares it
 * with these lines, and row-encoder.ts writes these same bytes without a string per row.
 *
 * Every column has a text form that each supported ClickHouse (18.16 through the current release)
 * reads alike, whatever its defaults: test/clickhouse/compat.test.ts inserts these exact bytes into
 * 18.16 and into the current engine and reads every column back. DateTime is the column whose
 * reading changed between releases:
 * - bare unix seconds with fewer than ten digits are misread by the `basic` parser (18.16's only
 *   reader, and current releases' `basic`), and current releases default to `best_effort`, which
 *   reads "1" as 2026-01-01;
 * - "YYYY-MM-DD hh:mm:ss" text is stored wrong by 18.16 after 2105-12-31 (2106-02-07 06:28:15
 *   became 23295);
 * - so a DateTime is exactly ten digits of unix seconds, zero-padded ("0000000001"), which every
 *   parser mode of the current engine and 18.16's `basic` read exactly; a TSV insert must pin
 *   `date_time_input_format=basic`, because 18.16's `best_effort` adds two seconds to it.
 * UInt64 are exact digits, UUID its text, the Enum8 its names, strings TSV-escaped UTF-8.
 */
import { cellId, type CdrRow } from "../cdr/row.ts";

/** A DateTime value: ten digits of unix seconds. */
export function dateTimeText(seconds: number): string {
  return String(seconds).padStart(10, "0");
}

/** Column order of every line; INSERT names them explicitly so the table may gain columns. */
export const COLUMNS = [
  "cdr_id",
  "raw_id",
  "device_id",
  "msisdn",
  "service_type",
  "radio_access_type",
  "cell_id",
  "session_start_time",
  "session_end_time",
  "duration_seconds",
  "up_bytes",
  "down_bytes",
  "total_bytes",
  "source_ip",
  "ingested_at",
  "kafka_partition",
  "kafka_offset",
] as const;

const NEEDS_ESCAPE = /[\\\t\n\r\0]/;
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0" };

/** TabSeparated escaping; most values need none, so test before replacing. */
export function escapeTsv(s: string): string {
  return NEEDS_ESCAPE.test(s) ? s.replace(/[\\\t\n\r\0]/g, (c) => ESCAPES[c]!) : s;
}

/** One line without its trailing newline; `ingestedAt` in unix seconds, provenance -1 when none. */
export function formatRow(r: CdrRow, ingestedAt: number, partition = -1, offset = -1): string {
  return [
    r.cdr_id, escapeTsv(r.raw_id), escapeTsv(r.device_id), r.msisdn, escapeTsv(r.service_type), r.radio_access_type,
    escapeTsv(cellId(r)), dateTimeText(r.session_start_time), dateTimeText(r.session_end_time), r.duration_seconds,
    r.up_bytes, r.down_bytes, r.total_bytes, r.source_ip, dateTimeText(ingestedAt), partition, offset,
  ].join("\t");
}
