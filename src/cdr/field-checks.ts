/**
 * The hot-path twin of schema.ts: the same per-field types and ranges, in the same order, as plain
 * comparisons (valibot's safeParse costs ~3.5 µs a record; this ~0.2 µs). test/cdr/schema.test.ts
 * checks on a fuzz corpus that both report the same field for every record, so speed never
 * changes a verdict.
 */
import { DATETIME_MAX, UINT32_MAX, UINT64_MAX, type RawField } from "./fields.ts";
import type { FieldIssue } from "./schema.ts";

const NEG_UINT64_MAX = -UINT64_MAX;
const NEG_UINT64_MAX_NUMBER = Number(NEG_UINT64_MAX);

function text(v: unknown): string | null {
  return typeof v === "string" ? null : "must be a string";
}

const DATETIME_MAX_BIG = BigInt(DATETIME_MAX);
const UINT32_MAX_BIG = BigInt(UINT32_MAX);

// BigInts reach here only from literals above 2^53 (json.ts), but a bigint in range is as valid
// as a number, exactly as the schema's union says.
function epoch(v: unknown): string | null {
  if (
    typeof v === "number"
      ? Number.isInteger(v) && v >= 0 && v <= DATETIME_MAX
      : typeof v === "bigint" && v >= 0n && v <= DATETIME_MAX_BIG
  )
    return null;
  return "must be an integer number of seconds in 0…4294967295 (ClickHouse DateTime)";
}

function bytes(v: unknown): string | null {
  if (typeof v === "number") {
    if (Number.isInteger(v) && v >= NEG_UINT64_MAX_NUMBER && v <= Number.MAX_SAFE_INTEGER) return null;
  } else if (typeof v === "bigint" && v >= NEG_UINT64_MAX && v <= UINT64_MAX) return null;
  return "must be an integer no larger than 18446744073709551615 (UInt64)";
}

function cellPart(v: unknown): string | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= UINT32_MAX) return null;
  if (typeof v === "bigint" && v >= 0n && v <= UINT32_MAX_BIG) return null;
  if (typeof v === "string") return null;
  return "must be a non-negative integer below 2^32 or a string";
}

const issue = (field: RawField, message: string | null): FieldIssue | null =>
  message === null ? null : { field, message };

/** The first type or range problem in precedence order, or null. Same verdicts as schema.ts. */
export function checkFieldTypes(r: Record<string, unknown>): FieldIssue | null {
  let m: string | null;
  if ((m = text(r.raw_id))) return issue("raw_id", m);
  if ((m = text(r.device_id))) return issue("device_id", m);
  if ((m = text(r.caller_num))) return issue("caller_num", m);
  if ((m = text(r.svc))) return issue("svc", m);
  if (typeof r.rat !== "number" || !Number.isInteger(r.rat)) return issue("rat", "must be an integer");
  if ((m = epoch(r.epoch_start))) return issue("epoch_start", m);
  if ((m = epoch(r.epoch_end))) return issue("epoch_end", m);
  if ((m = bytes(r.up_bytes))) return issue("up_bytes", m);
  if ((m = bytes(r.down_bytes))) return issue("down_bytes", m);
  if ((m = cellPart(r.lac))) return issue("lac", m);
  if ((m = cellPart(r.ci))) return issue("ci", m);
  const ip = r.source_ip;
  if (ip !== undefined && ip !== null && typeof ip !== "string") return issue("source_ip", "must be a string");
  return null;
}
