/** The raw vendor record's fields, the DLQ taxonomy, and the rules that tie them together. */

/** Required fields, in the order their absence is reported (docs/internals.md "Validation order"). */
export const REQUIRED_FIELDS = [
  "raw_id",
  "device_id",
  "caller_num",
  "svc",
  "rat",
  "epoch_start",
  "epoch_end",
  "up_bytes",
  "down_bytes",
  "lac",
  "ci",
] as const;
export type RequiredField = (typeof REQUIRED_FIELDS)[number];
export type RawField = RequiredField | "source_ip";

/** The closed taxonomy of `failure_reason` (docs/internals.md "DLQ envelope"). */
export const FAILURE_REASONS = [
  "missing_required_field",
  "invalid_rat_value",
  "invalid_epoch",
  "malformed_json",
  "normalization_error",
  "ch_insert_failed",
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** Fields whose type or range failure has a reason of its own; every other field's is normalization_error. */
export function reasonForField(field: string): FailureReason {
  if (field === "rat") return "invalid_rat_value";
  if (field === "epoch_start" || field === "epoch_end") return "invalid_epoch";
  return "normalization_error";
}

/** rat → radio_access_type. The ClickHouse Enum8 uses the same numbers. */
export const RAT_NAMES: Readonly<Record<number, RadioAccessType>> = { 1: "3G", 6: "LTE_4G", 9: "5G_NR" };
export type RadioAccessType = "3G" | "LTE_4G" | "5G_NR";

export const UINT32_MAX = 4_294_967_295;
export const UINT64_MAX = 18_446_744_073_709_551_615n;
/** ClickHouse DateTime holds seconds 0 … 2^32−1. */
export const DATETIME_MAX = UINT32_MAX;

// Texts have no length limit of their own: ClickHouse String stores any length, and the DLQ
// envelope truncates an oversized payload itself (dlq/envelope.ts). Kafka's message size bounds them.

/**
 * Most characters of payload an envelope carries: every record the raw topic admits at its 1 MiB
 * max.message.bytes, whole. The DLQ topic takes 8 MiB messages (topics/topology.ts), room for
 * such a payload even as a string whose every character escapes (up to 6×). A larger record, only
 * possible where an operator raised the raw topic's limit, travels truncated and says so
 * (dlq.payload.truncated): an envelope the DLQ refuses would be fatal on every restart.
 */
export const MAX_PAYLOAD_CHARS = 1 << 20;
