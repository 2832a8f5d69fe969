import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { cellId, decode, type Decoded } from "../../src/cdr/decode.ts";
import { REQUIRED_FIELDS } from "../../src/cdr/fields.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import uuidCases from "../fixtures/uuid5-python.json";
import { toJson, VALID_RECORD, withFields, type RawRecord } from "../fixtures/records.ts";

setDefaultTimeout(60_000);

const ctx = { phone: new PhoneNormalizer() };
const run = (r: RawRecord | string) => decode(typeof r === "string" ? r : toJson(r), ctx);
const rejection = (d: Decoded) => {
  if (d.ok) throw new Error(`expected a rejection, got row ${JSON.stringify(d.row, (_k, v) => (typeof v === "bigint" ? String(v) : v))}`);
  return { reason: d.rejection.reason, field: d.rejection.field };
};
const row = (d: Decoded) => {
  if (!d.ok) throw new Error(`expected a row, got ${JSON.stringify(d.rejection)}`);
  return d.row;
};

describe("Safe Parsing and Fault Tolerance", () => {
  test.each([
    ["not JSON", "{oops"],
    ["truncated", '{"raw_id":"a"'],
    ["an array", "[1,2]"],
    ["a string", '"text"'],
    ["a number", "42"],
    ["null", "null"],
    ["empty", ""],
  ])("Malformed or unparseable JSON payload (%s) → malformed_json, field null", (_name, text) => {
    expect(rejection(run(text))).toEqual({ reason: "malformed_json", field: null });
  });

  test("invalid UTF-8 and a null (tombstone) value are malformed_json too", () => {
    expect(rejection(decode(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), ctx))).toEqual({ reason: "malformed_json", field: null });
    expect(rejection(decode(null, ctx))).toEqual({ reason: "malformed_json", field: null });
  });

  for (const field of REQUIRED_FIELDS) {
    test(`Missing required field: ${field} absent → missing_required_field on ${field}`, () => {
      expect(rejection(run(withFields({ [field]: undefined })))).toEqual({ reason: "missing_required_field", field });
    });
    test(`Missing required field: ${field} null → missing_required_field on ${field}`, () => {
      expect(rejection(run(withFields({ [field]: null })))).toEqual({ reason: "missing_required_field", field });
    });
  }

  test("Inverted epoch timestamps → invalid_epoch on epoch_start", () => {
    expect(rejection(run(withFields({ epoch_start: 200, epoch_end: 100 })))).toEqual({ reason: "invalid_epoch", field: "epoch_start" });
  });

  test.each(["up_bytes", "down_bytes"])("Negative byte counts (%s) → normalization_error on that field", (field) => {
    expect(rejection(run(withFields({ [field]: -1 })))).toEqual({ reason: "normalization_error", field });
  });
});

describe("Radio Access Type Mapping", () => {
  test.each([[1, "3G"], [6, "LTE_4G"], [9, "5G_NR"]])("Supported RAT values mapped: %d → %s", (rat, name) => {
    expect(row(run(withFields({ rat }))).radio_access_type).toBe(name as "3G");
  });
  test.each([0, 2, 4, 5, 7, 8, 10, -1, 255])("Unsupported RAT value %d → invalid_rat_value on rat", (rat) => {
    expect(rejection(run(withFields({ rat })))).toEqual({ reason: "invalid_rat_value", field: "rat" });
  });
  test.each([["a string", "6"], ["a boolean", true], ["a fraction", 6.5]])("rat as %s → invalid_rat_value", (_n, rat) => {
    expect(rejection(run(withFields({ rat })))).toEqual({ reason: "invalid_rat_value", field: "rat" });
  });
});

describe("Schema Transformation and Deterministic Identity", () => {
  test("Computed metrics and cell identification", () => {
    const r = row(run(VALID_RECORD));
    expect(r).toEqual({
      cdr_id: uuidCases.cases.find((c) => c.raw_id === "raw-0001")!.cdr_id,
      raw_id: "raw-0001",
      device_id: "356938035643809",
      msisdn: "+4915112345678",
      service_type: "voice",
      radio_access_type: "LTE_4G",
      rat: 6,
      lac: 1234,
      ci: 5678,
      session_start_time: 1_700_000_000,
      session_end_time: 1_700_000_120,
      duration_seconds: 120,
      up_bytes: 1000,
      down_bytes: 2000,
      total_bytes: 3000,
      source_ip: (10 << 24) + (1 << 16) + (2 << 8) + 3,
    });
  });

  test("source_ip defaults to 0.0.0.0 if absent (absent, null or empty)", () => {
    for (const source_ip of [undefined, null, ""]) expect(row(run(withFields({ source_ip }))).source_ip).toBe(0);
  });

  test("Deterministic UUIDv5 cdr_id equals Python's uuid5(NAMESPACE_DNS, raw_id) for any Unicode raw_id", () => {
    for (const c of uuidCases.cases.filter((c) => c.raw_id.trim() !== "")) {
      expect(row(run(withFields({ raw_id: c.raw_id }))).cdr_id).toBe(c.cdr_id);
    }
  });

  test("reprocessing a record yields the identical row", () => {
    expect(row(run(VALID_RECORD))).toEqual(row(run(VALID_RECORD)));
  });
});

describe("Storage-safe normalization", () => {
  const U64 = 18446744073709551615n;
  test.each([
    ["0", 0, 0, 0],
    ["2^32−1", 4294967295, 0, 4294967295],
    ["2^32", 4294967296, 0, 4294967296],
    ["2^53+1 (exact)", 9007199254740993n, 0, 9007199254740993n],
    ["2^64−1 (exact)", U64, 0, U64],
    ["sum exactly 2^64−1", U64 - 5n, 5, U64],
  ])("byte counter boundary %s is stored exactly", (_n, up, down, total) => {
    const r = row(run(withFields({ up_bytes: up, down_bytes: down })));
    expect(String(r.up_bytes)).toBe(String(up));
    expect(String(r.total_bytes)).toBe(String(total));
  });

  test.each([
    ["up_bytes 2^64", { up_bytes: U64 + 1n }, "up_bytes"],
    ["down_bytes 2^64", { down_bytes: U64 + 1n }, "down_bytes"],
    ["up+down overflow", { up_bytes: U64, down_bytes: 1 }, "total_bytes"],
    ["fractional up_bytes", { up_bytes: 1.5 }, "up_bytes"],
    ["boolean up_bytes", { up_bytes: true }, "up_bytes"],
    ["string down_bytes", { down_bytes: "12" }, "down_bytes"],
    ["10^4-digit up_bytes", { up_bytes: BigInt("9".repeat(10_000)) }, "up_bytes"],
    ["numeric caller_num", { caller_num: 4915112345678 }, "caller_num"],
    ["boolean lac", { lac: false }, "lac"],
    ["fractional ci", { ci: 1.25 }, "ci"],
    ["negative lac", { lac: -3 }, "lac"],
    ["object svc", { svc: { a: 1 } }, "svc"],
    ["invalid IPv4", { source_ip: "300.1.2.3" }, "source_ip"],
    ["IPv4 with leading zero", { source_ip: "10.01.2.3" }, "source_ip"],
    ["IPv6", { source_ip: "::1" }, "source_ip"],
    ["numeric source_ip", { source_ip: 167772161 }, "source_ip"],
  ])("Invalid scalar or conversion: %s → normalization_error on the field", (_n, changes, field) => {
    expect(rejection(run(withFields(changes)))).toEqual({ reason: "normalization_error", field });
  });

  test.each([
    ["epoch_start −1", { epoch_start: -1 }, "epoch_start"],
    ["epoch_end 2^32", { epoch_end: 4294967296 }, "epoch_end"],
    ["epoch_start fractional", { epoch_start: 1.5 }, "epoch_start"],
    ["epoch_end boolean", { epoch_end: true }, "epoch_end"],
    ["epoch in milliseconds", { epoch_start: 1_700_000_000_000, epoch_end: 1_700_000_000_100 }, "epoch_start"],
  ])("timestamps outside DateTime (%s) → invalid_epoch on the field", (_n, changes, field) => {
    expect(rejection(run(withFields(changes)))).toEqual({ reason: "invalid_epoch", field });
  });

  test("epochs at the DateTime limits are accepted: 0 and 4294967295", () => {
    const r = row(run(withFields({ epoch_start: 0, epoch_end: 4294967295 })));
    expect(r.duration_seconds).toBe(4294967295);
  });

  test("lac and ci may be strings", () => {
    expect(cellId(row(run(withFields({ lac: "0x1A2B", ci: "77" }))))).toBe("0x1A2B_77");
    expect(cellId(row(run(withFields({ lac: 1234, ci: 5678 }))))).toBe("1234_5678");
  });

  test("texts have no length limit of their own: a 1,000-character raw_id and a 10,000-character device_id are valid", () => {
    const long = withFields({ raw_id: "r".repeat(1000), device_id: "d".repeat(10_000), svc: "s".repeat(500), lac: "l".repeat(300), ci: "c".repeat(300) });
    const r = row(run(long));
    expect(r.raw_id.length).toBe(1000);
    expect(r.device_id.length).toBe(10_000);
    expect(cellId(r)).toBe(`${"l".repeat(300)}_${"c".repeat(300)}`);
  });
});

describe("precedence for records with several defects (DECISIONS.md)", () => {
  test.each([
    ["missing beats type", { device_id: undefined, rat: "x" }, "missing_required_field", "device_id"],
    ["missing in field order", { ci: null, raw_id: undefined }, "missing_required_field", "raw_id"],
    ["type beats RAT value", { rat: 4, up_bytes: 1.5 }, "normalization_error", "up_bytes"],
    ["types field by field", { caller_num: 5, rat: true }, "normalization_error", "caller_num"],
    ["RAT beats epochs", { rat: 4, epoch_start: 10, epoch_end: 5 }, "invalid_rat_value", "rat"],
    ["epochs beat bytes", { epoch_start: 10, epoch_end: 5, up_bytes: -1 }, "invalid_epoch", "epoch_start"],
    ["bytes beat phone", { up_bytes: -1, caller_num: "+49123" }, "normalization_error", "up_bytes"],
    ["phone beats IP", { caller_num: "+49123", source_ip: "1.2.3" }, "normalization_error", "caller_num"],
  ])("%s", (_n, changes, reason, field) => {
    expect(rejection(run(withFields(changes)))).toEqual({ reason: reason as "invalid_epoch", field });
  });
});

describe("empty text counts as missing (an operator's expectation; the spec names absent and null)", () => {
  test.each(["raw_id", "caller_num", "svc"])("%s empty → missing_required_field", (field) => {
    expect(rejection(run(withFields({ [field]: "  " })))).toEqual({ reason: "missing_required_field", field });
  });
});

test("the rejection keeps the original payload text", () => {
  const text = toJson(withFields({ rat: 3, up_bytes: 18446744073709551615n }));
  const d = decode(text, ctx);
  expect(d.ok).toBe(false);
  if (!d.ok) {
    expect(d.rejection.payload).toBe(text);
    expect(d.rejection.payloadIsObject).toBe(true);
  }
});
