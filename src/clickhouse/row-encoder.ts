/**
 * Writes TSV rows straight into a batch's byte buffer: the same bytes as formatRow() + "\n",
 * without building a string per row and flattening them all in join() (4 µs a row, measured).
 * test/clickhouse/row-encoder.test.ts checks byte-equality with formatRow on fuzzed rows.
 */
import type { CdrRow, CellPart } from "../cdr/row.ts";
import type { ScannedRow } from "../cdr/record-scan.ts";
import { ByteBuffer } from "./byte-buffer.ts";
import { escapeTsv } from "./row-format.ts";

const TAB = 9;
const NL = 10;
const CR = 13;
const BACKSLASH = 92;
const UNDERSCORE = 95;

export class RowBuffer extends ByteBuffer {
  /** cdr_id is each line's first field, 36 ASCII characters. */
  cdrIdAt(at: number): string {
    return String.fromCharCode(...this.buf.subarray(at, at + 36));
  }

  // Short ASCII values are copied byte by byte in JS: a Buffer.write() per field is a native
  // call costing more than the copy. Anything else (non-ASCII, TSV escapes) takes the general path.
  #text(s: string): void {
    const n = s.length;
    this.reserve(n);
    const b = this.buf;
    const start = this.length;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80 || c === BACKSLASH || c === TAB || c === NL || c === CR || c === 0) return this.#textSlow(s, start);
      b[start + i] = c;
    }
    this.length = start + n;
  }

  #textSlow(s: string, start: number): void {
    const e = escapeTsv(s);
    this.length = start;
    this.reserve(e.length * 3);
    this.length += this.buf.write(e, this.length, "utf8");
  }

  /** Values that are ASCII by construction (UUID, E.164, enum names). */
  #ascii(s: string): void {
    const n = s.length;
    this.reserve(n);
    const b = this.buf;
    const start = this.length;
    for (let i = 0; i < n; i++) b[start + i] = s.charCodeAt(i);
    this.length = start + n;
  }

  // Digits written straight into the buffer with int32 arithmetic: no string per number. In
  // isolation this and native number-to-string cost the same (~85 ns); in the worker the eight
  // strings a row were garbage the collector paid for (the encoder's number path was ~12 % of the
  // worker's profile). Values are integers in 0…2^53 or bigints; anything else takes the string
  // path, which is what formatRow() writes.
  #uint(n: number | bigint): void {
    if (typeof n === "bigint" || !(n >= 0 && n <= Number.MAX_SAFE_INTEGER) || n !== Math.floor(n)) {
      this.#ascii(typeof n === "bigint" ? n.toString() : "" + n);
      return;
    }
    this.reserve(16);
    if (n <= 0x7fffffff) {
      this.digits(n | 0);
      return;
    }
    // Above 2^31: the high part (below 2^24) then the low nine digits, zero-padded.
    const lo = n % 1e9;
    this.digits((n - lo) / 1e9);
    this.#nineDigits(lo | 0);
  }

  /**
   * A DateTime as exactly ten digits of unix seconds (0 … 4294967295, zero-padded): the one form
   * every supported ClickHouse reads alike (see row-format.ts). Room for ten bytes is reserved.
   */
  #datetime(n: number): void {
    this.reserve(10);
    const lo = n % 1e9;
    this.buf[this.length++] = 0x30 + (n - lo) / 1e9;
    this.#nineDigits(lo | 0);
  }

  /** Nine decimal digits of v (0 … 999 999 999), zero-padded; room already reserved. */
  #nineDigits(v: number): void {
    const b = this.buf;
    let p = this.length + 9;
    this.length = p;
    for (let k = 0; k < 9; k++) {
      const q = (v / 10) | 0;
      b[--p] = 0x30 + (v - q * 10);
      v = q;
    }
  }



  /** lac or ci: digits for a number, TSV-escaped text for a string ("_" itself needs no escape). */
  #cellPart(v: CellPart): void {
    if (typeof v === "string") this.#text(v);
    else this.#uint(v);
  }

  #tab(): void {
    this.reserve(1);
    this.buf[this.length++] = TAB;
  }

  /** A scanned record's row: the readable format has no fast path of its own. */
  addScanned(r: ScannedRow, ingestedAt: number, partition = -1, offset = -1): void {
    this.add(r.toRow(), ingestedAt, partition, offset);
  }

  /** Appends one row and its newline. */
  add(r: CdrRow, ingestedAt: number, partition = -1, offset = -1): void {
    this.#ascii(r.cdr_id);
    this.#tab();
    this.#text(r.raw_id);
    this.#tab();
    this.#text(r.device_id);
    this.#tab();
    this.#ascii(r.msisdn);
    this.#tab();
    this.#text(r.service_type);
    this.#tab();
    this.#ascii(r.radio_access_type);
    this.#tab();
    this.#cellPart(r.lac);
    this.reserve(1);
    this.buf[this.length++] = UNDERSCORE;
    this.#cellPart(r.ci);
    this.#tab();
    this.#datetime(r.session_start_time);
    this.#tab();
    this.#datetime(r.session_end_time);
    this.#tab();
    this.#uint(r.duration_seconds);
    this.#tab();
    this.#uint(r.up_bytes);
    this.#tab();
    this.#uint(r.down_bytes);
    this.#tab();
    this.#uint(r.total_bytes);
    this.#tab();
    this.#uint(r.source_ip);
    this.#tab();
    this.#datetime(ingestedAt);
    this.#tab();
    this.#uint(partition); // -1 (no provenance) takes #uint's text path
    this.#tab();
    this.#uint(offset);
    this.reserve(1);
    this.buf[this.length++] = NL;
  }
}
