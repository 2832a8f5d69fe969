// Reads a RowBinary body of the worker's columns back into formatRow's TabSeparated lines: an
// independent decoder (DataView reads, TextDecoder), so the binary encoder is checked against the
// reference format value by value. A body that ends inside a value, or holds a value no column
// can, throws RowBinaryError naming the byte: never a row read from past the end.
import { RAT_NAMES } from "../../src/cdr/fields.ts";
import { dateTimeText, escapeTsv } from "../../src/clickhouse/row-format.ts";

export class RowBinaryError extends Error {
  override name = "RowBinaryError";
}

export function rowBinaryToTsv(body: Uint8Array): string[] {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const utf8 = new TextDecoder("utf-8", { fatal: true });
  let p = 0;
  const need = (n: number) => {
    if (p + n > body.length) throw new RowBinaryError(`body ends at byte ${body.length} inside a value at ${p} (${n} bytes)`);
  };
  const u8 = () => (need(1), view.getUint8(p++));
  const u32 = () => (need(4), (p += 4), view.getUint32(p - 4, true));
  const u64 = () => (need(8), (p += 8), view.getBigUint64(p - 8, true));
  const i32 = () => (need(4), (p += 4), view.getInt32(p - 4, true));
  const i64 = () => (need(8), (p += 8), view.getBigInt64(p - 8, true));
  const str = () => {
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      if (shift > 63) throw new RowBinaryError(`string length at ${p} runs past 10 bytes`);
      const c = u8();
      len += (c & 0x7f) * 2 ** shift;
      if (!(c & 0x80)) break;
    }
    need(len);
    p += len;
    try {
      return escapeTsv(utf8.decode(body.subarray(p - len, p)));
    } catch {
      throw new RowBinaryError(`string at ${p - len} is not UTF-8`);
    }
  };
  const rat = () => {
    const name = RAT_NAMES[(need(1), view.getInt8(p++))];
    if (name === undefined) throw new RowBinaryError(`Enum8 value at ${p - 1} is not a RAT`);
    return name;
  };
  const uuid = () => {
    need(16);
    // Each half is a UInt64 little-endian: its bytes reversed give the text's order.
    const hex = (lo: number) => [...body.subarray(lo, lo + 8)].reverse().map((b) => b.toString(16).padStart(2, "0")).join("");
    const h = hex(p) + hex(p + 8);
    p += 16;
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  const lines: string[] = [];
  while (p < body.length) {
    lines.push([
      uuid(), str(), str(), str(), str(), rat(), str(),
      dateTimeText(u32()), dateTimeText(u32()), u32(), u64(), u64(), u64(), u32(), dateTimeText(u32()), i32(), i64(),
    ].join("\t"));
  }
  return lines;
}
