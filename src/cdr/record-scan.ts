/**
 * The common valid record in one pass over its bytes: parsed, validated and normalized without a
 * string per field, an object per record or an intermediate row. The result (ScannedRow) holds
 * where each text lies in the payload and the numbers the row needs; the RowBinary encoder copies
 * the texts straight from the payload into the insert body (row-binary.ts `addScanned`).
 *
 * It accepts only what it can decide alone: a flat object of ASCII strings without escapes,
 * integers of up to 15 digits, true, false and null; each field once; every rule of decode.ts
 * passing. Anything else returns null and the record takes decode(), the reference, which also
 * gives every rejection: the DLQ envelope, `failed_field` and precedence never depend on this file.
 * test/cdr/record-scan.test.ts and the decode fuzz targets check that every record accepted here
 * is one decode() accepts, encoded to the same bytes.
 */
import type { CdrRow } from "./row.ts";
import { DATETIME_MAX, RAT_NAMES, UINT32_MAX } from "./fields.ts";
import { parseIPv4Bytes } from "./ipv4.ts";
import { BACKSLASH, CLOSE, COLON, COMMA, DOT, MINUS, NINE, OPEN, QUOTE, SPACE, ZERO } from "./json-bytes.ts";
import { digitKeyBytes, type PhoneNormalizer } from "./phone.ts";


// Up to 15 digits is below 2^53 whatever they are: the value, and the sum of two, stay exact.
const MAX_DIGITS = 15;

/** The fields, in REQUIRED_FIELDS order then source_ip; the index is the slot. */
const FIELD_NAMES = [
  "raw_id", "device_id", "caller_num", "svc", "rat", "epoch_start", "epoch_end",
  "up_bytes", "down_bytes", "lac", "ci", "source_ip",
] as const;
const RAW_ID = 0, DEVICE_ID = 1, CALLER_NUM = 2, SVC = 3, RAT = 4, EPOCH_START = 5, EPOCH_END = 6;
const UP_BYTES = 7, DOWN_BYTES = 8, LAC = 9, CI = 10, SOURCE_IP = 11;
const REQUIRED_MASK = (1 << SOURCE_IP) - 1;
const NAME_BYTES = FIELD_NAMES.map((n) => Uint8Array.from(n, (c) => c.charCodeAt(0)));

/** What a value was: the only kinds this scanner reads. */
const STRING = 1, NUMBER = 2, NULL = 3, BOOLEAN = 4;

/** A valid record as positions in its payload and the numbers of its row. */
export class ScannedRow {
  /** Set only here: tells a ScannedRow from decode()'s verdicts, which share `ok`. */
  readonly ok = true as const;
  readonly bytes: Uint8Array;
  rawIdStart = 0;
  rawIdEnd = 0;
  deviceIdStart = 0;
  deviceIdEnd = 0;
  svcStart = 0;
  svcEnd = 0;
  /** lac and ci: the integer, or -1 with the text's position when the vendor sent a string. */
  lac = 0;
  lacStart = 0;
  lacEnd = 0;
  ci = 0;
  ciStart = 0;
  ciEnd = 0;
  msisdn = "";
  /** svc as a string, shared with every record of the same service (the stats count by it). */
  service = "";
  rat = 0;
  sessionStart = 0;
  sessionEnd = 0;
  up = 0;
  down = 0;
  sourceIp = 0;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  /** The payload as text: ASCII by construction, so byte for byte what decode() would hold. */
  payload(): string {
    return asciiText(this.bytes, 0, this.bytes.length);
  }

  /** decode()'s row for this record, strings and all: for the readable encoders, not the hot path. */
  toRow(): CdrRow {
    const b = this.bytes;
    const rawId = asciiText(b, this.rawIdStart, this.rawIdEnd);
    return {
      cdr_id: Bun.randomUUIDv5(rawId, "dns"),
      raw_id: rawId,
      device_id: asciiText(b, this.deviceIdStart, this.deviceIdEnd),
      msisdn: this.msisdn,
      service_type: this.service,
      radio_access_type: RAT_NAMES[this.rat]!,
      rat: this.rat,
      lac: this.lac < 0 ? asciiText(b, this.lacStart, this.lacEnd) : this.lac,
      ci: this.ci < 0 ? asciiText(b, this.ciStart, this.ciEnd) : this.ci,
      session_start_time: this.sessionStart,
      session_end_time: this.sessionEnd,
      duration_seconds: this.sessionEnd - this.sessionStart,
      up_bytes: this.up,
      down_bytes: this.down,
      total_bytes: this.up + this.down,
      source_ip: this.sourceIp,
    };
  }
}

// Per-record scratch: filled by one scan, read before the next. Field kinds, value positions or numbers.
const kinds = new Uint8Array(FIELD_NAMES.length);
const starts = new Int32Array(FIELD_NAMES.length);
const ends = new Int32Array(FIELD_NAMES.length);
const numbers = new Float64Array(FIELD_NAMES.length);
// The field seen at each member position last time: vendors send their fields in a fixed order,
// so a key is usually confirmed by one comparison instead of looked up.
const seenAt = new Int8Array(64).fill(-1);

/** The record's row, or null when the record needs decode(): anything unusual, or invalid. */
export function scanRecord(b: Uint8Array, phone: PhoneNormalizer): ScannedRow | null {
  const n = b.length;
  let i = skipWs(b, 0, n);
  if (i >= n || b[i] !== OPEN) return null;
  i = skipWs(b, i + 1, n);
  let seen = 0;
  let position = 0;
  for (;;) {
    if (i >= n || b[i] !== QUOTE) return null;
    const keyStart = i + 1;
    const keyEnd = stringEnd(b, keyStart, n);
    if (keyEnd < 0) return null;
    let field = position < 64 ? seenAt[position]! : -1;
    if (field < 0 || !sameBytes(b, keyStart, keyEnd, NAME_BYTES[field]!)) {
      field = fieldOf(b, keyStart, keyEnd);
      if (position < 64) seenAt[position] = field;
    }
    position++;
    i = skipWs(b, keyEnd + 1, n);
    if (i >= n || b[i] !== COLON) return null;
    i = skipWs(b, i + 1, n);
    if (i >= n) return null;
    // The value: its kind and position, or its number.
    const c = b[i]!;
    let kind: number;
    let start = i;
    let end: number;
    let num = 0;
    if (c === QUOTE) {
      kind = STRING;
      start = i + 1;
      end = stringEnd(b, start, n);
      if (end < 0) return null;
      i = end + 1;
    } else if ((c >= ZERO && c <= NINE) || c === MINUS) {
      kind = NUMBER;
      let j = c === MINUS ? i + 1 : i;
      const first = j;
      while (j < n) {
        const d = b[j]! - ZERO;
        if (d < 0 || d > 9) break;
        num = num * 10 + d;
        j++;
      }
      const digits = j - first;
      // No digits, a leading zero (invalid JSON), too long to be exact, or a fraction or exponent:
      // decode()'s to read. So is a negative field: valid nowhere in a row.
      if (digits === 0 || digits > MAX_DIGITS || (b[first] === ZERO && digits > 1)) return null;
      if (j < n && (b[j] === DOT || b[j] === 0x65 || b[j] === 0x45)) return null;
      if (c === MINUS && field >= 0) return null;
      end = i = j;
    } else if (c === 0x6e && b[i + 1] === 0x75 && b[i + 2] === 0x6c && b[i + 3] === 0x6c) {
      kind = NULL;
      end = i += 4;
    } else if (c === 0x74 && b[i + 1] === 0x72 && b[i + 2] === 0x75 && b[i + 3] === 0x65) {
      kind = BOOLEAN;
      end = i += 4;
    } else if (c === 0x66 && b[i + 1] === 0x61 && b[i + 2] === 0x6c && b[i + 3] === 0x73 && b[i + 4] === 0x65) {
      kind = BOOLEAN;
      end = i += 5;
    } else return null;
    if (field >= 0) {
      const bit = 1 << field;
      if (seen & bit) return null; // a field twice: JSON.parse keeps the last, decode() says so
      seen |= bit;
      kinds[field] = kind;
      starts[field] = start;
      ends[field] = end;
      numbers[field] = num;
    }
    i = skipWs(b, i, n);
    if (i >= n) return null;
    const sep = b[i];
    if (sep === CLOSE) {
      if (skipWs(b, i + 1, n) !== n) return null;
      break;
    }
    if (sep !== COMMA) return null;
    i = skipWs(b, i + 1, n);
  }
  if ((seen & REQUIRED_MASK) !== REQUIRED_MASK) return null;
  return rowOf(b, seen, phone);
}

/** The rules of decode(), each failure a null (decode() then names it). */
function rowOf(b: Uint8Array, seen: number, phone: PhoneNormalizer): ScannedRow | null {
  if (!text(b, RAW_ID) || !text(b, DEVICE_ID) || !text(b, CALLER_NUM) || !text(b, SVC)) return null;
  if (kinds[RAT] !== NUMBER || RAT_NAMES[numbers[RAT]!] === undefined) return null;
  if (kinds[EPOCH_START] !== NUMBER || kinds[EPOCH_END] !== NUMBER) return null;
  const start = numbers[EPOCH_START]!;
  const end = numbers[EPOCH_END]!;
  if (end > DATETIME_MAX || start > end) return null;
  if (kinds[UP_BYTES] !== NUMBER || kinds[DOWN_BYTES] !== NUMBER) return null;
  if (!cellPart(b, LAC) || !cellPart(b, CI)) return null;
  let ip = 0;
  if (seen & (1 << SOURCE_IP)) {
    const k = kinds[SOURCE_IP];
    if (k === STRING) {
      if (ends[SOURCE_IP]! > starts[SOURCE_IP]!) {
        ip = parseIPv4Bytes(b, starts[SOURCE_IP]!, ends[SOURCE_IP]!);
        if (ip < 0) return null;
      }
    } else if (k !== NULL) return null;
  }
  const msisdn = phoneOf(b, starts[CALLER_NUM]!, ends[CALLER_NUM]!, phone);
  if (msisdn === null) return null;

  const r = new ScannedRow(b);
  r.rawIdStart = starts[RAW_ID]!;
  r.rawIdEnd = ends[RAW_ID]!;
  r.deviceIdStart = starts[DEVICE_ID]!;
  r.deviceIdEnd = ends[DEVICE_ID]!;
  r.svcStart = starts[SVC]!;
  r.svcEnd = ends[SVC]!;
  r.service = serviceText(b, r.svcStart, r.svcEnd);
  if (kinds[LAC] === STRING) {
    r.lac = -1;
    r.lacStart = starts[LAC]!;
    r.lacEnd = ends[LAC]!;
  } else r.lac = numbers[LAC]!;
  if (kinds[CI] === STRING) {
    r.ci = -1;
    r.ciStart = starts[CI]!;
    r.ciEnd = ends[CI]!;
  } else r.ci = numbers[CI]!;
  r.msisdn = msisdn;
  r.rat = numbers[RAT]!;
  r.sessionStart = start;
  r.sessionEnd = end;
  r.up = numbers[UP_BYTES]!;
  r.down = numbers[DOWN_BYTES]!;
  r.sourceIp = ip;
  return r;
}

/** A string with a character other than a space: present to decode()'s required-field rule. */
function text(b: Uint8Array, field: number): boolean {
  if (kinds[field] !== STRING) return false;
  for (let j = starts[field]!, e = ends[field]!; j < e; j++) if (b[j] !== SPACE) return true;
  return false;
}

/** lac or ci: an integer below 2^32 or a present string. */
function cellPart(b: Uint8Array, field: number): boolean {
  return kinds[field] === NUMBER ? numbers[field]! <= UINT32_MAX : text(b, field);
}

/**
 * The E.164 verdict: for "+digits" and "digits" (nearly every caller_num), asked of the phone
 * cache by its number key without making a string; otherwise, or on a miss, by the text.
 */
function phoneOf(b: Uint8Array, s: number, e: number, phone: PhoneNormalizer): string | null {
  const key = digitKeyBytes(b, s, e);
  if (key !== 0) {
    const cached = phone.cached(key);
    if (cached !== undefined) return cached;
  }
  return phone.normalize(asciiText(b, s, e));
}

// The services seen, as bytes and string: a handful per deployment, compared byte by byte.
const MAX_SERVICES = 32;
const serviceBytes: Uint8Array[] = [];
const serviceStrings: string[] = [];

function serviceText(b: Uint8Array, s: number, e: number): string {
  for (let k = 0; k < serviceBytes.length; k++) if (sameBytes(b, s, e, serviceBytes[k]!)) return serviceStrings[k]!;
  const t = asciiText(b, s, e);
  if (serviceBytes.length < MAX_SERVICES) {
    serviceBytes.push(b.slice(s, e));
    serviceStrings.push(t);
  }
  return t;
}

/** Which field the key at [s, e) names, or -1. */
function fieldOf(b: Uint8Array, s: number, e: number): number {
  for (let f = 0; f < NAME_BYTES.length; f++) if (sameBytes(b, s, e, NAME_BYTES[f]!)) return f;
  return -1;
}

function sameBytes(b: Uint8Array, s: number, e: number, want: Uint8Array): boolean {
  if (e - s !== want.length) return false;
  for (let k = 0; k < want.length; k++) if (b[s + k] !== want[k]) return false;
  return true;
}

/**
 * Index of the closing quote of a string whose content starts at `from`, or -1: an escape, a
 * control character or a byte above ASCII (UTF-8 validity and escapes are decode()'s to judge).
 */
function stringEnd(b: Uint8Array, from: number, n: number): number {
  for (let j = from; j < n; j++) {
    const c = b[j]!;
    if (c === QUOTE) return j;
    if (c === BACKSLASH || c < 0x20 || c >= 0x80) return -1;
  }
  return -1;
}

function skipWs(b: Uint8Array, i: number, n: number): number {
  while (i < n) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** ASCII bytes as a string (every byte this scanner accepts is below 0x80, so any payload it took). */
export function asciiText(b: Uint8Array, s: number, e: number): string {
  if (e - s > 64) return latin1.decode(b.subarray(s, e));
  let t = "";
  for (let j = s; j < e; j++) t += String.fromCharCode(b[j]!);
  return t;
}

const latin1 = new TextDecoder("latin1");
