// The byte encoder must write exactly what the straightforward formatRow() + "\n" writes.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { RowBuffer } from "../../src/clickhouse/row-encoder.ts";
import { formatRow } from "../../src/clickhouse/row-format.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { AWKWARD_VALID_RECORDS, toJson, withFields } from "../fixtures/records.ts";

setDefaultTimeout(60_000);

test("RowBuffer bytes equal formatRow lines for 20k synthetic rows and awkward values", () => {
  const ctx = { phone: new PhoneNormalizer() };
  const gen = new SyntheticCdrs({ seed: 17, invalidShare: 0 });
  const texts = Array.from({ length: 20_000 }, () => gen.next().text);
  texts.push(
    ...AWKWARD_VALID_RECORDS,
  );
  const buf = new RowBuffer(16); // tiny start: growth is exercised too
  const lines: string[] = [];
  for (const t of texts) {
    const d = decode(t, ctx);
    if (!d.ok) continue;
    buf.add(d.row, 1_700_000_123);
    lines.push(formatRow(d.row, 1_700_000_123));
  }
  expect(lines.length).toBe(20_006);
  expect(Buffer.from(buf.bytes()).toString("utf8")).toBe(lines.join("\n") + "\n");
});

test("numbers are written digit by digit exactly as formatRow writes them, at every boundary", () => {
  const base = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
  if (!base.ok) throw new Error("fixture record must be valid");
  const values: Array<number | bigint> = [
    0, 1, 9, 10, 99, 100, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 999_999_999, 1_000_000_000, 1_000_000_001,
    5_000_000_007, 10 ** 15, 10 ** 15 + 1, 2 ** 53 - 1, 18446744073709551615n, 9007199254740993n,
  ];
  let seed = 3;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 5000; i++) values.push(Math.floor(rnd() * 10 ** (1 + Math.floor(rnd() * 15))));
  const buf = new RowBuffer(16);
  const lines: string[] = [];
  for (const v of values) {
    const seconds = typeof v === "number" && v < 2 ** 32 ? v : 0;
    const row = { ...base.row, up_bytes: v, down_bytes: v, total_bytes: v, session_start_time: seconds };
    buf.add(row, seconds);
    lines.push(formatRow(row, seconds));
  }
  expect(Buffer.from(buf.bytes()).toString("utf8")).toBe(lines.join("\n") + "\n");
});

test("DateTime columns are exactly ten digits of unix seconds at every digit count, 0 through 4294967295", () => {
  const base = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
  if (!base.ok) throw new Error("fixture record must be valid");
  const buf = new RowBuffer(16);
  const seconds = [0, 4294967295, 2 ** 31 - 1, 2 ** 31, 999_999_999, 1_000_000_000];
  for (let d = 1; d <= 10; d++) seconds.push(10 ** (d - 1), 10 ** d - 1 > 4294967295 ? 4294967295 : 10 ** d - 1);
  for (const s of seconds) {
    buf.reset();
    buf.add({ ...base.row, session_start_time: s, session_end_time: s }, s);
    const cols = Buffer.from(buf.bytes()).toString("utf8").trimEnd().split("\t");
    const want = String(s).padStart(10, "0");
    expect([cols[7], cols[8], cols[14]]).toEqual([want, want, want]);
  }
});
