// What the DLQ table reads out of a refused payload: raw_id, device_id and the caller's prefix,
// from an object of any field types or from malformed text, null where nothing readable is there.
import { expect, setDefaultTimeout, test } from "bun:test";
import { callerPrefix, lenientFields } from "../../../src/dlq/table/lenient.ts";

setDefaultTimeout(60_000);

test("an object's fields as strings or numbers; other types, absent or empty fields are null", () => {
  expect(lenientFields({ raw_id: "r-1", device_id: 356938035643809, caller_num: "+447700900123" })).toEqual({
    raw_id: "r-1",
    device_id: "356938035643809",
    caller_prefix: "+44",
  });
  expect(lenientFields({ raw_id: { x: 1 }, device_id: "", caller_num: ["+44"] })).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
  // A field inherited, not the payload's own, is not read.
  expect(lenientFields(JSON.parse('{"__proto__":{"raw_id":"x"}}'))).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
});

test("malformed text: the first \"name\": value pair, escapes read, a long value cut to 256 characters", () => {
  expect(lenientFields('{"raw_id":"a\\"b","device_id": 42,"caller_num":"0049 151 12345678", oops')).toEqual({
    raw_id: 'a"b',
    device_id: "42",
    caller_prefix: "+49",
  });
  expect(lenientFields(`{"device_id":"${"d".repeat(300)}"`).device_id).toHaveLength(256);
  expect(lenientFields("not json at all")).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
  expect(lenientFields('{"device_id":"unterminated')).toMatchObject({ device_id: null });
});

test("the caller prefix: international forms, the default region for national ones, null for what reads as no number", () => {
  expect(callerPrefix("+14155550123")).toBe("+1");
  expect(callerPrefix("011447700900123")).toBe("+44");
  expect(callerPrefix("07700900123", "GB")).toBe("+44");
  expect(callerPrefix("07700900123")).toBeNull();
  expect(callerPrefix("hello")).toBeNull();
  expect(callerPrefix("+" + "9".repeat(80))).toBeNull();
  expect(callerPrefix(null)).toBeNull();
});
