// Reads a RowBinary body of the worker's columns back into formatRow's TabSeparated lines: an
// independent decoder (DataView reads, TextDecoder), so the binary encoder is checked against the
// reference format value by value.
import { RAT_NAMES } from "../../src/cdr/fields.ts";
import { dateTimeText, escapeTsv } from "../../src/clickhouse/row-format.ts";

export function rowBinaryToTsv(body: Uint8Array): string[] {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const utf8 = new TextDecoder("utf-8", { fatal: true });
  let p = 0;
  const u8 = () => view.getUint8(p++);
  const u32 = () => ((p += 4), view.getUint32(p - 4, true));
  const u64 = () => ((p += 8), view.getBigUint64(p - 8, true));
  const i32 = () => ((p += 4), view.getInt32(p - 4, true));
  const i64 = () => ((p += 8), view.getBigInt64(p - 8, true));
  const str = () => {
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      const c = u8();
      len += (c & 0x7f) * 2 ** shift;
      if (!(c & 0x80)) break;
    }
    p += len;
    return escapeTsv(utf8.decode(body.subarray(p - len, p)));
  };
  const uuid = () => {
    // Each half is a UInt64 little-endian: its bytes reversed give the text's order.
    const hex = (lo: number) => [...body.subarray(lo, lo + 8)].reverse().map((b) => b.toString(16).padStart(2, "0")).join("");
    const h = hex(p) + hex(p + 8);
    p += 16;
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  const lines: string[] = [];
  while (p < body.length) {
    lines.push([
      uuid(), str(), str(), str(), str(), RAT_NAMES[view.getInt8(p++)] ?? "?", str(),
      dateTimeText(u32()), dateTimeText(u32()), u32(), u64(), u64(), u64(), u32(), dateTimeText(u32()), i32(), i64(),
    ].join("\t"));
  }
  return lines;
}
