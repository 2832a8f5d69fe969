// The binary insert body must hold exactly what the reference TabSeparated line (formatRow) says:
// every row decoded back, value by value, by an independent reader (test/support/row-binary.ts).
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode, type CdrRow } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { formatRow } from "../../src/clickhouse/row-format.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { AWKWARD_VALID_RECORDS, toJson, withFields } from "../fixtures/records.ts";
import { storageCorpus } from "../fixtures/storage-corpus.ts";
import { rowBinaryToTsv } from "../support/row-binary.ts";

setDefaultTimeout(60_000);

const ctx = { phone: new PhoneNormalizer() };
const INGESTED_AT = 1_700_000_123;

function rowsOf(texts: string[]): CdrRow[] {
  return texts.map((t) => {
    const d = decode(t, ctx);
    if (!d.ok) throw new Error(`fixture record refused: ${JSON.stringify(d.rejection)}`);
    return d.row;
  });
}

function expectSame(rows: CdrRow[], ingestedAt: (i: number) => number = () => INGESTED_AT): void {
  const buf = new RowBinaryBuffer(16); // tiny start: growth is exercised too
  rows.forEach((r, i) => buf.add(r, ingestedAt(i)));
  expect(rowBinaryToTsv(buf.bytes())).toEqual(rows.map((r, i) => formatRow(r, ingestedAt(i))));
}

test("RowBinary rows decode to formatRow's lines for 20k synthetic rows and awkward values", () => {
  const gen = new SyntheticCdrs({ seed: 17, invalidShare: 0 });
  const texts = Array.from({ length: 20_000 }, () => gen.next().text);
  texts.push(
    ...AWKWARD_VALID_RECORDS,
    toJson(withFields({ lac: 4294967295, ci: 4294967295 })),
    // Lengths around the one-byte varint's end, ASCII and not.
    ...[126, 127, 128, 129, 16383, 16384, 70_000].flatMap((n) => [toJson(withFields({ device_id: "d".repeat(n) })), toJson(withFields({ device_id: "é".repeat(n) }))]),
  );
  const rows = rowsOf(texts);
  expect(rows.length).toBe(20_021);
  expectSame(rows);
});

test("every edge record of the storage corpus", () => {
  expectSame(rowsOf(storageCorpus(INGESTED_AT).map((r) => r.text)));
});

test("integers at every width boundary: UInt64 exact above 2^53, DateTime and UInt32 to 2^32 − 1", () => {
  const [base] = rowsOf([toJson(withFields({}))]);
  const values: Array<number | bigint> = [
    0, 1, 255, 256, 65535, 65536, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 18446744073709551615n,
    9007199254740993n, 2n ** 63n, 2n ** 63n - 1n,
  ];
  let seed = 3;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 5000; i++) values.push(Math.floor(rnd() * 10 ** (1 + Math.floor(rnd() * 15))));
  const rows = values.map((v) => {
    const s = typeof v === "number" && v < 2 ** 32 ? v : 0;
    return { ...base!, up_bytes: v, down_bytes: v, total_bytes: v, session_start_time: s, session_end_time: s, duration_seconds: s, source_ip: s };
  });
  expectSame(rows, (i) => rows[i]!.session_start_time);
});

test("any run of rows is a body of its own: rows end where the batch records them", () => {
  const rows = rowsOf(Array.from({ length: 50 }, (_, i) => toJson(withFields({ raw_id: `r-${i}`, device_id: `d${"é".repeat(i * 7)}` }))));
  const buf = new RowBinaryBuffer(16);
  const ends: number[] = [];
  for (const r of rows) {
    buf.add(r, INGESTED_AT);
    ends.push(buf.length);
  }
  const lines = rows.map((r) => formatRow(r, INGESTED_AT));
  for (const [lo, hi] of [[0, 1], [3, 17], [49, 50], [10, 11], [0, 50]] as const)
    expect(rowBinaryToTsv(buf.bytes().subarray(lo === 0 ? 0 : ends[lo - 1], ends[hi - 1]))).toEqual(lines.slice(lo, hi));
});

test("reset keeps no bytes of the rows before, and gives back a buffer grown for large rows", () => {
  const [small] = rowsOf([toJson(withFields({}))]);
  const [large] = rowsOf([toJson(withFields({ device_id: "x".repeat(3 << 20) }))]);
  const buf = new RowBinaryBuffer();
  buf.add(large!, 1);
  expect(buf.buf.length).toBeGreaterThan(3 << 20);
  buf.reset();
  buf.add(small!, 2);
  expect(rowBinaryToTsv(buf.bytes())).toEqual([formatRow(small!, 2)]);
  buf.reset();
  expect(buf.buf.length).toBeLessThan(1 << 20);
});
