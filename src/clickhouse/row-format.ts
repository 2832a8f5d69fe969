/**
 * CdrRow → one TabSeparated line: the straightforward reference of the format. The worker writes
 * the same bytes with row-encoder.ts (no string per row); tests compare the two. TSV is the
 * cheapest text format for ClickHouse to parse and the same on 18.16 and current releases;
 * DateTime columns take unix seconds, UInt64 exact digits.
 */
import { cellId, type CdrRow } from "../cdr/decode.ts";

/** Column order of every line; INSERT names them explicitly so the table may gain columns. */
export const COLUMNS = [
  "cdr_id", "raw_id", "device_id", "msisdn", "service_type", "radio_access_type", "cell_id",
  "session_start_time", "session_end_time", "duration_seconds", "up_bytes", "down_bytes", "total_bytes",
  "source_ip", "ingested_at",
] as const;

const NEEDS_ESCAPE = /[\\\t\n\r\0]/;
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0" };

/** TabSeparated escaping; most values need none, so test before replacing. */
export function escapeTsv(s: string): string {
  return NEEDS_ESCAPE.test(s) ? s.replace(/[\\\t\n\r\0]/g, (c) => ESCAPES[c]!) : s;
}

/** One line without its trailing newline; `ingestedAt` in unix seconds. */
export function formatRow(r: CdrRow, ingestedAt: number): string {
  return `${r.cdr_id}\t${escapeTsv(r.raw_id)}\t${escapeTsv(r.device_id)}\t${r.msisdn}\t${escapeTsv(r.service_type)}\t${r.radio_access_type}\t${escapeTsv(cellId(r))}\t${r.session_start_time}\t${r.session_end_time}\t${r.duration_seconds}\t${r.up_bytes}\t${r.down_bytes}\t${r.total_bytes}\t${r.source_ip}\t${ingestedAt}`;
}
