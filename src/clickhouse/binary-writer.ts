/**
 * ClickHouse RowBinary's values, written into a ByteBuffer at `length`: what the worker's rows
 * (row-binary.ts) and the DLQ table's (dlq-table/row-binary.ts) are made of.
 *   UUID      16 bytes: the first and the second half of the textual UUID, each a UInt64 little-endian
 *   String    LEB128 byte length, then UTF-8
 *   UInt32/64 little-endian; Int32/64 little-endian two's complement
 */
import { ByteBuffer } from "./byte-buffer.ts";

const TWO_32 = 4294967296;

/** hex digit char code → value; 255 where not a hex digit. */
const HEX = new Uint8Array(128).fill(255);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = HEX[65 + i] = 10 + i;

/** Where the 16 byte pairs of a textual UUID start, in ClickHouse's byte order (each half reversed). */
export const UUID_PAIRS = (() => {
  const text: number[] = [];
  for (let i = 0; i < 36; i++) if (i !== 8 && i !== 13 && i !== 18 && i !== 23) text.push(i), i++;
  return Uint8Array.from([...text.slice(0, 8).reverse(), ...text.slice(8).reverse()]);
})();

export class BinaryWriter extends ByteBuffer {
  protected varint(n: number): void {
    const b = this.buf;
    while (n >= 0x80) {
      b[this.length++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    b[this.length++] = n;
  }

  // Short ASCII strings are copied char by char: a Buffer.write() per field is a native call that
  // costs more than the copy. Anything else is measured, then written as UTF-8 by the runtime.
  protected string(s: string): void {
    const n = s.length;
    if (n < 128) {
      this.reserve(n + 1);
      const b = this.buf;
      const start = this.length + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[start + i] = c;
      }
      if (i === n) {
        b[this.length] = n;
        this.length = start + n;
        return;
      }
    }
    const bytes = Buffer.byteLength(s, "utf8");
    this.reserve(bytes + 10);
    this.varint(bytes);
    this.length += this.buf.write(s, this.length, bytes, "utf8");
  }

  protected uuid(s: string): void {
    this.reserve(16);
    const b = this.buf;
    const p = this.length;
    for (let k = 0; k < 16; k++) {
      const i = UUID_PAIRS[k]!;
      b[p + k] = (HEX[s.charCodeAt(i) & 127]! << 4) | HEX[s.charCodeAt(i + 1) & 127]!;
    }
    this.length = p + 16;
  }

  protected u32(v: number): void {
    const b = this.buf;
    const p = this.length;
    b[p] = v;
    b[p + 1] = v >>> 8;
    b[p + 2] = v >>> 16;
    b[p + 3] = v >>> 24;
    this.length = p + 4;
  }

  protected u64(v: number | bigint): void {
    if (typeof v === "bigint") {
      this.u32(Number(v & 0xffffffffn));
      this.u32(Number((v >> 32n) & 0xffffffffn));
      return;
    }
    const lo = v % TWO_32;
    this.u32(lo);
    this.u32((v - lo) / TWO_32);
  }

  /** A signed integer in the safe range as Int64 little-endian (two's complement). */
  protected i64(v: number): void {
    const hi = Math.floor(v / TWO_32);
    this.u32(v - hi * TWO_32);
    this.u32(hi);
  }
}
