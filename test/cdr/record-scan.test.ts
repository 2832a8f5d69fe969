// The single pass (record-scan.ts + RowBinaryBuffer.addScanned) against the reference path
// (decode() + RowBinaryBuffer.add): every record the scan accepts, decode() accepts, and both write
// the same row bytes. Anything the scan declines is decode()'s alone, so verdicts cannot differ.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { scanRecord } from "../../src/cdr/record-scan.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import phoneVerdicts from "../fixtures/phone-verdicts.json";
import { AWKWARD_VALID_RECORDS, toJson, VALID_RECORD, withFields } from "../fixtures/records.ts";
import uuidCases from "../fixtures/uuid5-python.json";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const phone = new PhoneNormalizer({ cacheSize: 1000 });

type Outcome = "scanned" | "declined";

/** Runs both paths on `bytes`; throws where they disagree. */
function differential(bytes: Uint8Array, provenance: [number, number] = [3, 1234]): Outcome {
  const fast = scanRecord(bytes, phone);
  const ref = decode(bytes, { phone });
  if (fast === null) return "declined";
  if (!ref.ok) throw new Error(`scan accepted what decode rejects (${ref.rejection.reason}/${ref.rejection.field})`);
  const a = new RowBinaryBuffer(16);
  const b = new RowBinaryBuffer(16);
  a.addScanned(fast, 1_700_000_000, ...provenance);
  b.add(ref.row, 1_700_000_000, ...provenance);
  expect(Buffer.from(a.bytes()).toString("hex")).toBe(Buffer.from(b.bytes()).toString("hex"));
  expect(fast.payload()).toBe(ref.payload);
  expect(fast.service).toBe(ref.row.service_type);
  expect(fast.rat).toBe(ref.row.rat);
  expect(fast.sessionStart).toBe(ref.row.session_start_time);
  return "scanned";
}

const bytesOf = (r: Record<string, unknown>) => enc.encode(toJson(r));

describe("record scan: one pass from bytes to the RowBinary row", () => {
  test("the valid record is scanned and written as decode() + add() write it", () => {
    expect(differential(bytesOf({ ...VALID_RECORD }))).toBe("scanned");
    expect(differential(bytesOf({ ...VALID_RECORD }), [-1, -1])).toBe("scanned");
  });

  test("the awkward valid records: scanned alike, or declined (escapes, non-ASCII, big integers)", () => {
    const outcomes = AWKWARD_VALID_RECORDS.map((t) => differential(enc.encode(t)));
    // "lac": 0 with "ci": "x_y" is plain ASCII: the scan takes it; the escaped and non-ASCII ones it leaves.
    expect(outcomes).toContain("scanned");
    expect(outcomes).toContain("declined");
  });

  test("cdr_id: every raw_id of the Python UUIDv5 corpus, as far as the scan takes it", () => {
    let scanned = 0;
    for (const c of uuidCases.cases) if (differential(bytesOf(withFields({ raw_id: c.raw_id }))) === "scanned") scanned++;
    // The blank raw_id is missing_required_field; the non-ASCII ones are decode()'s.
    expect(scanned).toBeGreaterThanOrEqual(uuidCases.cases.filter((c) => /^[\x21-\x7e][\x20-\x7e]*$/.test(c.raw_id)).length);
  });

  test("caller_num: every form of the phone parity corpus gives decode()'s verdict", () => {
    let scanned = 0;
    for (const c of phoneVerdicts.cases) {
      if (differential(bytesOf(withFields({ caller_num: c.caller_num }))) === "scanned") scanned++;
    }
    expect(scanned).toBeGreaterThan(0);
    expect(scanned).toBeLessThan(phoneVerdicts.cases.length); // the invalid ones are declined
  });

  test("a generated stream of 50k records (3 % invalid): alike, and nearly every valid record scanned", () => {
    const gen = new SyntheticCdrs({ seed: 11, invalidShare: 0.03 });
    let scanned = 0;
    let valid = 0;
    for (let i = 0; i < 50_000; i++) {
      const r = gen.next();
      const bytes = enc.encode(r.text);
      if (differential(bytes, [i % 3, i]) === "scanned") scanned++;
      if (r.defect === null) valid++;
    }
    // Valid generated records whose caller_num carries an international prefix or punctuation
    // still scan: the phone verdict comes from the same cache.
    expect(scanned).toBeGreaterThan(valid * 0.99);
    expect(scanned).toBeLessThanOrEqual(valid);
  });

  test("members in any order, with whitespace and unknown members beside them", () => {
    const r = { extra: [1, 2], ...VALID_RECORD } as Record<string, unknown>;
    expect(differential(enc.encode(JSON.stringify(r)))).toBe("declined"); // nested: decode()'s
    const { lac: _lac, ci: _ci, ...rest } = VALID_RECORD;
    const spaced = `{ "ci" : 5678 ,\n"lac":"ab c", "x": -0, "y": null, "z": true, "w": false, "v": "s",` + JSON.stringify(rest).slice(1);
    expect(differential(enc.encode(spaced))).toBe("scanned");
  });

  const declined: Array<[string, string]> = [
    ["an escape in a value", toJson(withFields({ device_id: "a\\b" }))],
    ["an escaped key", toJson(withFields({})).replace('"svc"', '"\\u0073vc"')],
    ["a field twice", toJson(withFields({})).replace('"rat":6', '"rat":6,"rat":1')],
    ["a fraction", toJson(withFields({})).replace('"rat":6', '"rat":6.0')],
    ["an exponent", toJson(withFields({})).replace('"up_bytes":1000', '"up_bytes":1e3')],
    ["a leading zero", toJson(withFields({})).replace('"up_bytes":1000', '"up_bytes":01000')],
    ["16 digits", toJson(withFields({ up_bytes: 1234567890123456 }))],
    ["a negative counter", toJson(withFields({ down_bytes: -1 }))],
    ["a byte above ASCII", toJson(withFields({ svc: "dätä" }))],
    ["a BOM", "\uFEFF" + toJson(withFields({}))],
    ["a blank required string", toJson(withFields({ svc: "   " }))],
    ["an empty required string", toJson(withFields({ device_id: "" }))],
    ["a null field", toJson(withFields({ lac: null }))],
    ["an absent field", toJson(withFields({ ci: undefined }))],
    ["rat 2", toJson(withFields({ rat: 2 }))],
    ["epoch_start after epoch_end", toJson(withFields({ epoch_start: 10, epoch_end: 9 }))],
    ["epoch_end past 2^32 − 1", toJson(withFields({ epoch_end: 4294967296 }))],
    ["lac past 2^32 − 1", toJson(withFields({ lac: 4294967296 }))],
    ["a bad IPv4", toJson(withFields({ source_ip: "010.1.1.1" }))],
    ["a numeric source_ip", toJson(withFields({ source_ip: 167837955 }))],
    ["an invalid phone", toJson(withFields({ caller_num: "+999" }))],
    ["a boolean text field", toJson(withFields({ raw_id: true }))],
    ["trailing bytes", toJson(withFields({})) + "x"],
    ["a cut record", toJson(withFields({})).slice(0, -1)],
    ["an array", `[${toJson(withFields({}))}]`],
  ];
  test.each(declined)("declined to decode(): %s", (_name, text) => {
    expect(differential(enc.encode(text))).toBe("declined");
  });

  test("source_ip absent, null or empty is 0.0.0.0, as decode() makes it", () => {
    for (const ip of [undefined, null, ""]) expect(differential(bytesOf(withFields({ source_ip: ip })))).toBe("scanned");
  });

  test("long texts (a length of two varint bytes) and integer edges", () => {
    const long = "r".repeat(300);
    expect(differential(bytesOf(withFields({ raw_id: long, device_id: "d".repeat(128), svc: "s".repeat(127) })))).toBe("scanned");
    expect(differential(bytesOf(withFields({ lac: "l".repeat(200), ci: 4294967295 })))).toBe("scanned");
    expect(
      differential(bytesOf(withFields({ up_bytes: 999999999999999, down_bytes: 999999999999999, epoch_start: 0, epoch_end: 4294967295 }))),
    ).toBe("scanned");
    expect(differential(bytesOf(withFields({ lac: 0, ci: 0, rat: 1 })))).toBe("scanned");
  });
});
