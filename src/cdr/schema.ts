/**
 * Types and storage ranges of the raw record, one valibot schema per field, checked in the order
 * of REQUIRED_FIELDS then source_ip (docs/internals.md "Validation order"). Semantic rules that come
 * later in the precedence (RAT values, epoch order, byte sums, phone, IP format) live in decode.ts.
 */
import * as v from "valibot";
import { DATETIME_MAX, UINT32_MAX, UINT64_MAX, type RawField } from "./fields.ts";

const text = () => v.string("must be a string");

/** An integer given as a JSON number (exact below 2^53) or as a big literal parsed to BigInt. */
const integer = (min: number | bigint, max: number | bigint, what: string) =>
  v.union(
    [
      v.pipe(
        v.number(),
        v.integer(),
        v.minValue(Number(min)),
        v.maxValue(Number(max) > Number.MAX_SAFE_INTEGER ? Number.MAX_SAFE_INTEGER : Number(max)),
      ),
      v.pipe(v.bigint(), v.minValue(BigInt(min)), v.maxValue(BigInt(max))),
    ],
    `must be ${what}`,
  );

const epoch = integer(0, DATETIME_MAX, "an integer number of seconds in 0…4294967295 (ClickHouse DateTime)");
// Negative counters pass here and are reported by the byte rule, which names them as negative.
const bytes = integer(-UINT64_MAX, UINT64_MAX, "an integer no larger than 18446744073709551615 (UInt64)");
const cellPart = () =>
  v.union([integer(0, UINT32_MAX, ""), text()], "must be a non-negative integer below 2^32 or a string");

export const FIELD_SCHEMAS = {
  raw_id: text(),
  device_id: text(),
  caller_num: text(),
  svc: text(),
  rat: v.pipe(v.number("must be an integer"), v.integer("must be an integer")),
  epoch_start: epoch,
  epoch_end: epoch,
  up_bytes: bytes,
  down_bytes: bytes,
  lac: cellPart(),
  ci: cellPart(),
  source_ip: v.nullish(v.string("must be a string")),
} as const satisfies Record<RawField, v.GenericSchema>;

/** The whole raw record; abortEarly stops at the first field in precedence order. */
export const RawCdrSchema = v.looseObject(FIELD_SCHEMAS);

export interface FieldIssue {
  field: RawField;
  message: string;
}

/** The first type or range problem in precedence order, or null when every field is well-typed. */
export function firstTypeIssue(record: Record<string, unknown>): FieldIssue | null {
  const result = v.safeParse(RawCdrSchema, record, { abortEarly: true });
  if (result.success) return null;
  const issue = result.issues[0];
  const key = issue.path?.[0]?.key;
  return { field: (typeof key === "string" ? key : "raw_id") as RawField, message: issue.message };
}
