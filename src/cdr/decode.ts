/**
 * One raw Kafka value → a normalized ClickHouse row, or a rejection naming the reason and field.
 * Pure: no I/O, never throws for any input. Rules apply in the fixed precedence of
 * docs/internals.md "Validation order":
 * JSON, required fields, types and ranges field by field, RAT, epochs, bytes, phone, IP.
 */
import {
  REQUIRED_FIELDS,
  RAT_NAMES,
  MAX_PAYLOAD_CHARS,
  UINT64_MAX,
  reasonForField,
  type FailureReason,
} from "./fields.ts";
import { parseIPv4 } from "./ipv4.ts";
import { parseRecord } from "./json.ts";
import type { PhoneNormalizer } from "./phone.ts";
import { checkFieldTypes } from "./field-checks.ts";
import { ScannedRow } from "./record-scan.ts";
import type { CdrRow, CellPart } from "./row.ts";

export { cellId, type CdrRow, type CellPart } from "./row.ts";

export interface Rejection {
  reason: FailureReason;
  field: string | null;
  /** Human-readable cause; travels in a DLQ header, not in the envelope. */
  detail: string;
  /** The original payload text. */
  payload: string;
  /** True when `payload` is a JSON object (the envelope embeds it as an object). */
  payloadIsObject: boolean;
  /** The record's size where `payload` holds only its first bytes (over RECORD_MAX_BYTES). */
  wholeBytes?: number;
}

export type Decoded = { ok: true; row: CdrRow; payload: string } | { ok: false; rejection: Rejection };

/**
 * What the worker hands over for a record: the single pass's row (record-scan.ts) for a common
 * valid record, decode()'s verdict for every other.
 */
export type Verdict = Decoded | ScannedRow;

/** The record's payload text, whichever way it decoded. */
export function payloadOf(d: Verdict): string {
  if (d instanceof ScannedRow) return d.payload();
  return d.ok ? d.payload : d.rejection.payload;
}

export interface DecodeContext {
  phone: PhoneNormalizer;
  /** RECORD_MAX_BYTES: a larger record is refused unread (oversized()); none when absent. */
  recordMaxBytes?: number;
}

export function decode(value: Uint8Array | string | null, ctx: DecodeContext, wholeBytes?: number): Decoded {
  if (isOversized(value, ctx, wholeBytes)) return oversized(value!, ctx.recordMaxBytes!, wholeBytes);
  const parsed = parseRecord(value);
  if (!parsed.ok) return reject("malformed_json", null, parsed.detail, parsed.text, false);
  const rec = parsed.record;
  const text = parsed.text;

  for (const f of REQUIRED_FIELDS) {
    const v = rec[f];
    if (v === undefined || v === null || (typeof v === "string" && v.trim().length === 0)) {
      return reject(
        "missing_required_field",
        f,
        `${f} is ${v === undefined ? "absent" : v === null ? "null" : "empty"}`,
        text,
        true,
      );
    }
  }

  const issue = checkFieldTypes(rec);
  if (issue) return reject(reasonForField(issue.field), issue.field, `${issue.field} ${issue.message}`, text, true);

  const rat = rec.rat as number;
  const ratName = RAT_NAMES[rat];
  if (ratName === undefined) return reject("invalid_rat_value", "rat", `rat ${rat} is not 1, 6 or 9`, text, true);

  const start = Number(rec.epoch_start);
  const end = Number(rec.epoch_end);
  if (start > end)
    return reject("invalid_epoch", "epoch_start", `epoch_start ${start} is after epoch_end ${end}`, text, true);

  const up = rec.up_bytes as number | bigint;
  const down = rec.down_bytes as number | bigint;
  if (up < 0) return reject("normalization_error", "up_bytes", `up_bytes ${up} is negative`, text, true);
  if (down < 0) return reject("normalization_error", "down_bytes", `down_bytes ${down} is negative`, text, true);
  const total = sum(up, down);
  if (total === null)
    return reject(
      "normalization_error",
      "total_bytes",
      `up_bytes + down_bytes exceeds 18446744073709551615 (UInt64)`,
      text,
      true,
    );

  const msisdn = ctx.phone.normalize(rec.caller_num as string);
  if (msisdn === null)
    return reject("normalization_error", "caller_num", "caller_num is not a valid phone number", text, true);

  const ipText = rec.source_ip as string | null | undefined;
  let ip = 0;
  if (ipText !== undefined && ipText !== null && ipText !== "") {
    ip = parseIPv4(ipText);
    if (ip < 0)
      return reject("normalization_error", "source_ip", "source_ip is not a dotted-quad IPv4 address", text, true);
  }

  const rawId = rec.raw_id as string;
  return {
    ok: true,
    payload: text,
    row: {
      cdr_id: Bun.randomUUIDv5(rawId, "dns"),
      raw_id: rawId,
      device_id: rec.device_id as string,
      msisdn,
      service_type: rec.svc as string,
      radio_access_type: ratName,
      rat,
      lac: rec.lac as CellPart,
      ci: rec.ci as CellPart,
      session_start_time: start,
      session_end_time: end,
      duration_seconds: end - start,
      up_bytes: up,
      down_bytes: down,
      total_bytes: total,
      source_ip: ip,
    },
  };
}

/** up + down exactly, or null above UInt64. Stays in doubles while the sum is exact. */
function sum(a: number | bigint, b: number | bigint): number | bigint | null {
  if (typeof a === "number" && typeof b === "number") {
    const s = a + b;
    if (Number.isSafeInteger(s)) return s;
  }
  const s = BigInt(a) + BigInt(b);
  return s > UINT64_MAX ? null : s;
}

/**
 * A record librdkafka could not read: its bytes never reached the worker. It goes to the DLQ as
 * malformed_json with no field and no payload, whatever the fault (`_BAD_MSG`: a record or batch
 * that does not parse; `_BAD_COMPRESSION`: a batch that does not decompress within
 * receive.message.max.bytes, a decompression bomb or a producer's batch past it). librdkafka's
 * `text` names the batch's offsets and size (scripts/librdkafka/patches/unreadable-batches.patch)
 * and rides in the envelope's error header. Only its producer's records share the fate: a producer
 * batches only its own.
 */
export function undecodable(error: string, text?: string): Decoded {
  const detail = text
    ? `librdkafka could not read the record (${error}): ${text}`
    : `librdkafka could not decode the record: ${error}`;
  return reject("malformed_json", null, detail, "", false);
}

/**
 * Whether a record is over RECORD_MAX_BYTES: then it is neither scanned nor parsed. `wholeBytes`:
 * its size where `value` holds only its first bytes (the consumer copies no more).
 */
export function isOversized(value: Uint8Array | string | null, ctx: DecodeContext, wholeBytes?: number): boolean {
  if (value === null || ctx.recordMaxBytes === undefined) return false;
  return (wholeBytes ?? byteLength(value)) > ctx.recordMaxBytes;
}

function byteLength(value: Uint8Array | string): number {
  return typeof value === "string" ? Buffer.byteLength(value) : value.length;
}

/**
 * A record over RECORD_MAX_BYTES: normalization_error with no field, whatever it holds. Its size
 * alone is against it, and a row that large would cost ClickHouse and the worker's memory bound
 * what no CDR needs. Only the first MAX_PAYLOAD_CHARS bytes are decoded, for the envelope's
 * payload, which travels marked truncated with the record's size.
 */
export function oversized(value: Uint8Array | string, max: number, wholeBytes?: number): Decoded {
  const bytes = wholeBytes ?? byteLength(value);
  const head =
    typeof value === "string"
      ? value.slice(0, MAX_PAYLOAD_CHARS)
      : lossy.decode(value.subarray(0, MAX_PAYLOAD_CHARS));
  const detail = `the record's ${bytes} bytes are over RECORD_MAX_BYTES (${max})`;
  const reason = "normalization_error" as const;
  const rejection = { reason, field: null, detail, payload: head, payloadIsObject: false, wholeBytes: bytes };
  return { ok: false, rejection };
}

/**
 * The verdict for a record whose decoding threw: a defect of this program, never of the record, and
 * it must not stop the worker (every owner of the partition would stop on it in turn). The record
 * is dead-lettered like any rejection, `normalization_error` when its payload is a JSON object (it
 * parsed, a later rule failed) and `malformed_json` otherwise; the detail names the error. Total:
 * nothing in it can throw again.
 */
export function decodeFailed(value: Uint8Array | string | null, error: unknown): Decoded {
  const detail = `decoding threw: ${errorText(error)}`;
  let text = "";
  try {
    text = value === null ? "" : typeof value === "string" ? value : lossy.decode(value);
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed))
      return reject("normalization_error", null, detail, text, true);
  } catch {
    // Not a JSON object: the payload travels as text.
  }
  return reject("malformed_json", null, detail, text, false);
}

const lossy = new TextDecoder("utf-8");

function errorText(error: unknown): string {
  try {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    return "an error that cannot be shown";
  }
}

function reject(
  reason: FailureReason,
  field: string | null,
  detail: string,
  payload: string,
  payloadIsObject: boolean,
): Decoded {
  return { ok: false, rejection: { reason, field, detail, payload, payloadIsObject } };
}
