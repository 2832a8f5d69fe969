/**
 * Writes rows as ClickHouse RowBinary straight into a batch's reusable byte buffer: the insert body
 * the worker sends. Binary costs the server far less to read than text (no parsing, no escapes) and
 * leaves nothing to interpretation: a DateTime is its UInt32, not text an input setting may read
 * another way.
 *
 * A RowBinary body is read by position and width, so it is exact only against the column types
 * below, in COLUMNS' order; migrate.ts's checkSchema refuses to start against any other.
 *   UUID      16 bytes: the first and the second half of the textual UUID, each a UInt64 little-endian
 *   String    LEB128 byte length, then UTF-8
 *   Enum8     the rat code as Int8
 *   DateTime  UInt32 little-endian
 *   UInt32/64 little-endian; Int32/64 (the Kafka provenance) little-endian two's complement
 * Each row is self-contained, so any run of rows is itself a valid body (store.ts splits by row).
 * The TSV encoder (row-encoder.ts) and formatRow (row-format.ts) stay the readable reference:
 * test/clickhouse/row-binary.test.ts decodes this body and compares it with formatRow.
 */
import type { CdrRow, CellPart } from "../cdr/row.ts";
import type { ScannedRow } from "../cdr/record-scan.ts";
import { BinaryWriter, UUID_PAIRS } from "./binary-writer.ts";
import { ByteBuffer } from "./byte-buffer.ts";

const UNDERSCORE = 95;
/** The text of the UUID whose 16 RowBinary bytes start at `at` (lower-case, as ClickHouse's toString). */
export function uuidTextAt(buf: Uint8Array, at: number): string {
  const text = new Array<string>(36).fill("-");
  for (let k = 0; k < 16; k++) {
    const i = UUID_PAIRS[k]!;
    const b = buf[at + k]!;
    text[i] = HEX_DIGITS[b >> 4]!;
    text[i + 1] = HEX_DIGITS[b & 15]!;
  }
  return text.join("");
}

const HEX_DIGITS = "0123456789abcdef";

/** The DNS namespace UUID (RFC 4122), the one decode() names cdr_id in (Bun.randomUUIDv5(raw_id, "dns")). */
const DNS_NAMESPACE = Uint8Array.from([
  0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
]);
// UUIDv5 input (namespace, then the name) and SHA-1 output, reused: the hash runs once a row. A
// view of the input per name length below 256 is kept too, so that a row makes no typed array of its own.
let uuidInput = new Uint8Array(256);
uuidInput.set(DNS_NAMESPACE);
let uuidViews: Uint8Array[] = [];
const sha1 = new Uint8Array(20);

export class RowBinaryBuffer extends BinaryWriter {
  /** cdr_id is each row's first column. */
  cdrIdAt(at: number): string {
    return uuidTextAt(this.buf, at);
  }



  /** An ASCII string known to be shorter than 128 (UUID text is not one of these: E.164 numbers). */
  #shortAscii(s: string): void {
    const n = s.length;
    this.reserve(n + 1);
    const b = this.buf;
    b[this.length++] = n;
    for (let i = 0; i < n; i++) b[this.length + i] = s.charCodeAt(i);
    this.length += n;
  }




  /** cell_id, "<lac>_<ci>", as one String: its parts are written then its length put in front. */
  #cellId(lac: CellPart, ci: CellPart): void {
    const text = typeof lac === "string" || typeof ci === "string" || typeof lac === "bigint" || typeof ci === "bigint";
    if (text) {
      this.string(`${lac}_${ci}`);
      return;
    }
    // Two integers below 2^32: at most 21 ASCII bytes, so the length is one byte.
    this.reserve(22);
    const at = this.length++;
    this.digits(lac);
    this.buf[this.length++] = UNDERSCORE;
    this.digits(ci);
    this.buf[at] = this.length - at - 1;
  }




  /** Bytes [s, e) of a payload as a String: ASCII (record-scan.ts accepts nothing else), so copied as they are. */
  #bytes(src: Uint8Array, s: number, e: number): void {
    const n = e - s;
    this.reserve(n + 10);
    this.varint(n);
    const b = this.buf;
    const p = this.length;
    if (n > 64) b.set(src.subarray(s, e), p);
    else for (let k = 0; k < n; k++) b[p + k] = src[s + k]!;
    this.length = p + n;
  }

  /**
   * cdr_id, UUIDv5 of raw_id in the DNS namespace (what Bun.randomUUIDv5 computes), hashed from
   * the payload's bytes and written in ClickHouse's order without its text.
   */
  #uuidOf(src: Uint8Array, s: number, e: number): void {
    const n = e - s;
    if (uuidInput.length < 16 + n) {
      uuidInput = new Uint8Array(Math.max(2 * uuidInput.length, 16 + n));
      uuidInput.set(DNS_NAMESPACE);
      uuidViews = [];
    }
    if (n > 64) uuidInput.set(src.subarray(s, e), 16);
    else for (let k = 0; k < n; k++) uuidInput[16 + k] = src[s + k]!;
    const input = n < 256 ? (uuidViews[n] ??= uuidInput.subarray(0, 16 + n)) : uuidInput.subarray(0, 16 + n);
    Bun.SHA1.hash(input, sha1);
    sha1[6] = (sha1[6]! & 0x0f) | 0x50; // version 5
    sha1[8] = (sha1[8]! & 0x3f) | 0x80; // RFC 4122 variant
    this.reserve(16);
    const b = this.buf;
    const p = this.length;
    // Each 8-byte half as a little-endian UInt64: its bytes reversed.
    for (let k = 0; k < 8; k++) {
      b[p + k] = sha1[7 - k]!;
      b[p + 8 + k] = sha1[15 - k]!;
    }
    this.length = p + 16;
  }

  /** A cell part's bytes in cell_id: the text's, or the integer's digits. */
  #cellPartLength(v: number, s: number, e: number): number {
    return v < 0 ? e - s : ByteBuffer.width(v);
  }

  #cellPart(src: Uint8Array, v: number, s: number, e: number): void {
    if (v >= 0) this.digits(v);
    else for (let k = s; k < e; k++) this.buf[this.length++] = src[k]!;
  }

  /** Appends the row of a scanned record: the same bytes as add() of decode()'s row for it. */
  addScanned(r: ScannedRow, ingestedAt: number, partition = -1, offset = -1): void {
    const src = r.bytes;
    this.#uuidOf(src, r.rawIdStart, r.rawIdEnd);
    this.#bytes(src, r.rawIdStart, r.rawIdEnd);
    this.#bytes(src, r.deviceIdStart, r.deviceIdEnd);
    this.#shortAscii(r.msisdn);
    this.#bytes(src, r.svcStart, r.svcEnd);
    const cell = this.#cellPartLength(r.lac, r.lacStart, r.lacEnd) + 1 + this.#cellPartLength(r.ci, r.ciStart, r.ciEnd);
    this.reserve(1 + 10 + cell + 3 * 4 + 3 * 8 + 2 * 4 + 4 + 8);
    this.buf[this.length++] = r.rat;
    this.varint(cell);
    this.#cellPart(src, r.lac, r.lacStart, r.lacEnd);
    this.buf[this.length++] = UNDERSCORE;
    this.#cellPart(src, r.ci, r.ciStart, r.ciEnd);
    this.u32(r.sessionStart);
    this.u32(r.sessionEnd);
    this.u32(r.sessionEnd - r.sessionStart);
    this.u64(r.up);
    this.u64(r.down);
    this.u64(r.up + r.down);
    this.u32(r.sourceIp);
    this.u32(ingestedAt);
    this.u32(partition);
    this.i64(offset);
  }

  /** Appends one row; `partition` and `offset` are its Kafka provenance (-1: none). */
  add(r: CdrRow, ingestedAt: number, partition = -1, offset = -1): void {
    this.uuid(r.cdr_id);
    this.string(r.raw_id);
    this.string(r.device_id);
    this.#shortAscii(r.msisdn);
    this.string(r.service_type);
    this.reserve(1 + 3 * 4 + 4 * 8 + 4);
    this.buf[this.length++] = r.rat;
    this.#cellId(r.lac, r.ci);
    this.reserve(3 * 4 + 3 * 8 + 2 * 4 + 4 + 8);
    this.u32(r.session_start_time);
    this.u32(r.session_end_time);
    this.u32(r.duration_seconds);
    this.u64(r.up_bytes);
    this.u64(r.down_bytes);
    this.u64(r.total_bytes);
    this.u32(r.source_ip);
    this.u32(ingestedAt);
    this.u32(partition);
    this.i64(offset);
  }
}
