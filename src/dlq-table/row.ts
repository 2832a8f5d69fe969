/**
 * A DLQ record as a row of the DLQ table (sql/002_dlq.sql). Every record of the topic becomes one
 * row: an envelope with its headers' provenance and what its payload leniently says, and a record
 * that is not an envelope with `unreadable` saying why and its text as the payload. Whatever its
 * bytes, the row is one ClickHouse takes (fitRow): anyone who may write to the DLQ topic, and any
 * producer of the raw topic whose record the worker dead-letters, chooses them, and one row the
 * server refuses would hold every row behind it. Pure.
 */
import type { CountryCode } from "libphonenumber-js/max";
import { DATETIME_MAX } from "../cdr/fields.ts";
import type { Message } from "../kafka/message.ts";
import { envelopeSource, HEADERS, MAX_PAYLOAD_CHARS } from "../dlq/envelope.ts";
import { payloadDigest, type ProvenanceKey, type SignedSource } from "../dlq/provenance-mac.ts";
import { readEnvelope } from "../dlq/reader.ts";
import { lenientFields } from "./lenient.ts";

export interface DlqRow {
  failed_at: string;
  failure_reason: string;
  failed_field: string | null;
  stage: string;
  error_detail: string;
  attempts: number | null;
  source_topic: string;
  source_partition: number;
  source_offset: number;
  dlq_partition: number;
  dlq_offset: number;
  worker_instance: string;
  payload_sha256: string;
  mac_verified: 0 | 1 | null;
  raw_id: string | null;
  cdr_id: string | null;
  device_id: string | null;
  caller_prefix: string | null;
  original_payload: string;
  payload_truncated: 0 | 1;
  payload_as_text: string;
  unreadable: string;
  stored_at: string;
}

export interface RowContext {
  /** Seconds: the filler's clock when it stores the batch (the row's daily partition). */
  storedAt: number;
  key?: ProvenanceKey;
  defaultRegion?: CountryCode;
}

const text = new TextDecoder();

/** The last second dateTimeText wrote, and its text: the rows of one batch share their stored_at. */
let lastSecond = -1;
let lastText = "";

/** ClickHouse DateTime text of `seconds`, clamped to what the type holds. */
export function dateTimeText(seconds: number): string {
  const s = Number.isFinite(seconds) ? Math.min(DATETIME_MAX, Math.max(0, Math.floor(seconds))) : 0;
  if (s !== lastSecond) {
    lastText = new Date(s * 1000).toISOString().slice(0, 19).replace("T", " ");
    lastSecond = s;
  }
  return lastText;
}

/** An ISO time in UTC as the worker writes `failed_at` (toISOString), of a year DateTime holds whole. */
const ISO_UTC = /^(?:19[7-9]\d|20\d\d|210[0-5])-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z$/;
const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The DateTime text of an envelope's `failed_at`. The worker's own form, a real instant, is its
 * first 19 characters with a space for the T: what Date.parse and toISOString would give, without
 * them (they cost the filler half a microsecond a row). Any other text goes through Date.parse and
 * is clamped.
 */
export function failedAtText(iso: string): string {
  if (ISO_UTC.test(iso)) {
    const year = digits(iso, 0, 4), month = digits(iso, 5, 2), day = digits(iso, 8, 2);
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
    const days = month === 2 && !leap ? 28 : DAYS[month - 1];
    const hour = digits(iso, 11, 2), minute = digits(iso, 14, 2), second = digits(iso, 17, 2);
    if (days !== undefined && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59)
      return `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
  }
  return dateTimeText(Date.parse(iso) / 1000);
}

/** The number `s[at, at + n)` spells in ASCII digits (the caller has matched them). */
function digits(s: string, at: number, n: number): number {
  let v = 0;
  for (let i = at; i < at + n; i++) v = v * 10 + s.charCodeAt(i) - 48;
  return v;
}

export function dlqRow(m: Message, ctx: RowContext): DlqRow {
  const stored_at = dateTimeText(ctx.storedAt);
  const read = readEnvelope(m);
  if (typeof read === "string") {
    const raw = m.value ? text.decode(m.value) : "";
    const src = envelopeSource(m.headers);
    // Rare (a record anyone wrote there): built from EMPTY, as the refused row is.
    return fitRow({
      ...EMPTY,
      source_topic: src?.topic ?? "",
      source_partition: src?.partition ?? -1,
      source_offset: src?.offset ?? -1,
      dlq_partition: m.partition,
      dlq_offset: m.offset,
      payload_sha256: payloadDigest(raw),
      original_payload: raw,
      unreadable: read,
      stored_at,
    });
  }
  const { envelope: e, headers: h, payloadText } = read;
  const src = envelopeSource(h);
  const lenient = lenientFields(e.original_payload, ctx.defaultRegion);
  const attempts = Number(h[HEADERS.attempts]);
  const truncated = h[HEADERS.truncated] === "true";
  const verified = macVerified(src, m, ctx.key);
  return fitRow({
    failed_at: failedAtText(e.failed_at),
    failure_reason: e.failure_reason,
    failed_field: e.failed_field,
    stage: read.stage,
    error_detail: h[HEADERS.detail] ?? "",
    attempts: h[HEADERS.attempts] !== undefined && Number.isInteger(attempts) && attempts >= 0 ? attempts : null,
    source_topic: src?.topic ?? "",
    source_partition: src?.partition ?? -1,
    source_offset: src?.offset ?? -1,
    dlq_partition: m.partition,
    dlq_offset: m.offset,
    worker_instance: e.worker_instance,
    payload_sha256: provenDigest(verified, truncated, src) ?? payloadDigest(payloadText),
    mac_verified: verified,
    raw_id: lenient.raw_id,
    cdr_id: lenient.raw_id === null ? null : Bun.randomUUIDv5(lenient.raw_id, "dns"),
    device_id: lenient.device_id,
    caller_prefix: lenient.caller_prefix,
    original_payload: payloadText,
    payload_truncated: truncated ? 1 : 0,
    payload_as_text: h[HEADERS.asText] ?? "",
    unreadable: "",
    stored_at,
  });
}

/**
 * The row's text columns: each is made well-formed Unicode, so that its UTF-8 in the table is the
 * text a reader gets back (a lone surrogate has no UTF-8; the binary body would write U+FFFD
 * unannounced).
 */
const TEXT_FIELDS = [
  "failure_reason",
  "failed_field",
  "stage",
  "error_detail",
  "source_topic",
  "worker_instance",
  "raw_id",
  "device_id",
  "caller_prefix",
  "original_payload",
  "payload_as_text",
] as const satisfies ReadonlyArray<keyof DlqRow>;

/**
 * Most characters each text column keeps. A DLQ record is whatever its writer chose, up to the DLQ
 * topic's limit (8 MiB and more): a row's every field is capped, and counted (rowBytes), so that
 * the rows a filler holds stay within its bound. The worker's own envelopes fit whole: its payload
 * is at most MAX_PAYLOAD_CHARS, its detail a line.
 */
export const FIELD_CAPS = {
  failure_reason: 64,
  failed_field: 256,
  stage: 64,
  error_detail: 64 * 1024,
  source_topic: 249, // Kafka's longest topic name
  worker_instance: 256,
  raw_id: 256,
  device_id: 256,
  caller_prefix: 256,
  original_payload: MAX_PAYLOAD_CHARS + 1024, // and the worker's "…[truncated: N in all]" after a cut
  payload_as_text: 16,
  unreadable: 4096,
} as const satisfies Partial<Record<keyof DlqRow, number>>;

/** What a row holds, in characters of its text columns, and 512 for the rest: what the filler's bound counts. */
export function rowBytes(row: DlqRow): number {
  let n = 512;
  for (const f of TEXT_FIELDS) n += row[f]?.length ?? 0;
  return n + row.unreadable.length;
}

/**
 * `s` cut to `max` characters, never inside a surrogate pair, as a string of its own: a slice of a
 * long string keeps the whole of it alive (measured: 60 rows of 8 MB fields cut to 256 characters
 * held 560 MiB), so the cut is copied out.
 */
function cut(s: string, max: number): string {
  const end = max > 0 && /[\uD800-\uDBFF]/.test(s[max - 1]!) ? max - 1 : max;
  return Buffer.from(s.slice(0, end), "utf16le").toString("utf16le");
}

const INT32 = 2 ** 31;
const UINT32_MAX = 2 ** 32 - 1;

/**
 * The row as ClickHouse takes it, whatever the record held: a lone UTF-16 surrogate (a vendor's
 * `"\ud83d"`, or a character cut at a cap) becomes U+FFFD, and a number a header gives outside its
 * column (Int32 partition, Int64 offset read exactly only up to 2^53, UInt32 attempts) becomes the
 * column's "none" (-1 or NULL). `unreadable` names each field so mended. Mends `row` in place and
 * returns it: a row that needs nothing (every worker envelope) is not copied.
 */
export function fitRow(row: DlqRow): DlqRow {
  const mended: string[] = [];
  for (const f of TEXT_FIELDS) {
    let v = row[f];
    if (typeof v !== "string") continue;
    const cap = FIELD_CAPS[f];
    if (v.length <= cap && v.isWellFormed()) continue;
    if (v.length > cap) {
      mended.push(`${f}: cut at ${cap} of its ${v.length} characters`);
      v = cut(v, cap);
    }
    if (!v.isWellFormed()) {
      v = v.toWellFormed();
      mended.push(`${f}: a lone surrogate replaced by U+FFFD`);
    }
    row[f] = v;
  }
  if (!Number.isInteger(row.source_partition) || row.source_partition < -INT32 || row.source_partition >= INT32) {
    row.source_partition = -1;
    mended.push("source_partition: out of Int32");
  }
  if (!Number.isSafeInteger(row.source_offset)) {
    row.source_offset = -1;
    mended.push("source_offset: out of the exact integers");
  }
  if (row.attempts !== null && (!Number.isInteger(row.attempts) || row.attempts < 0 || row.attempts > UINT32_MAX)) {
    row.attempts = null;
    mended.push("attempts: out of UInt32");
  }
  if (mended.length > 0 || row.unreadable.length > FIELD_CAPS.unreadable || !row.unreadable.isWellFormed())
    row.unreadable = cut([row.unreadable, ...mended].filter(Boolean).join("; "), FIELD_CAPS.unreadable).toWellFormed();
  return row;
}

const EPOCH_TEXT = "1970-01-01 00:00:00";

const EMPTY: Omit<DlqRow, "dlq_partition" | "dlq_offset" | "stored_at"> = {
  failed_at: EPOCH_TEXT,
  failure_reason: "",
  failed_field: null,
  stage: "",
  error_detail: "",
  attempts: null,
  source_topic: "",
  source_partition: -1,
  source_offset: -1,
  worker_instance: "",
  payload_sha256: "",
  mac_verified: null,
  raw_id: null,
  cdr_id: null,
  device_id: null,
  caller_prefix: null,
  original_payload: "",
  payload_truncated: 0,
  payload_as_text: "",
  unreadable: "",
};

/** Most characters of the server's words kept in a refused row's `unreadable`. */
const REFUSAL_CHARS = 1_000;

/**
 * The row stored in place of one the server refused alone (filler.ts): its place (DLQ partition and
 * offset, so the table's position passes it), its source and digest, and nothing read from the
 * record's text, with `unreadable` giving the server's words. The record stays in the DLQ topic.
 */
export function refusedRow(row: DlqRow, refusal: string): DlqRow {
  return fitRow({
    ...EMPTY,
    dlq_partition: row.dlq_partition,
    dlq_offset: row.dlq_offset,
    stored_at: row.stored_at,
    source_topic: row.source_topic,
    source_partition: row.source_partition,
    source_offset: row.source_offset,
    payload_sha256: row.payload_sha256,
    unreadable: `the server refused the row: ${refusal.slice(0, REFUSAL_CHARS)}`,
  });
}

/**
 * 1 when the MAC proves the whole envelope as it lies in the topic (provenance-mac.ts, form 3), so
 * every field of the row is the worker's; 0 when it does not, an older form's included (it proves
 * the source only); null when unchecked (no key, or no MAC).
 */
function macVerified(src: SignedSource | null, m: Message, key?: ProvenanceKey): 0 | 1 | null {
  if (!key || !src?.mac || !src.digest) return null;
  return key.proves(src, m) === "whole" ? 1 : 0;
}

/**
 * The payload's digest as the envelope's proven header gives it: the worker's SHA-256 of the payload
 * it read, which is the payload the envelope holds unless it was cut. Null where unproven or cut:
 * the row's digest is then computed (saving it cost the filler 0.4 µs an envelope).
 */
function provenDigest(verified: 0 | 1 | null, truncated: boolean, src: SignedSource | null): string | null {
  return verified === 1 && !truncated && src?.digest !== undefined ? src.digest : null;
}
