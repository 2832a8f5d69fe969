// A stage that throws costs one record, never the worker: the record becomes a rejection.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode, type DecodeContext } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import type { Message } from "../../src/kafka/message.ts";
import { decodeOne } from "../../src/worker/decode-guard.ts";
import { toJson, withFields } from "../fixtures/records.ts";

setDefaultTimeout(60_000);

const ctx: DecodeContext = { phone: new PhoneNormalizer({ cacheSize: 0 }) };
const message = (value: Uint8Array | null): Message => ({
  topic: "t", partition: 2, offset: 7, timestamp: -1, value, key: null, headers: undefined,
});
const throwing = () => {
  throw new RangeError("Maximum call stack size exceeded.");
};

test("a decoder that throws on a JSON object yields normalization_error with the error's text, payload kept as an object", () => {
  const payload = new TextEncoder().encode(toJson(withFields({})));
  const d = decodeOne(message(payload), ctx, throwing);
  expect(d.ok).toBe(false);
  if (d.ok) return;
  expect(d.rejection).toMatchObject({ reason: "normalization_error", field: null, payloadIsObject: true });
  expect(d.rejection.detail).toBe("decoding threw: RangeError: Maximum call stack size exceeded.");
  expect(d.rejection.payload).toBe(new TextDecoder().decode(payload));
});

test("a decoder that throws on what is not a JSON object yields malformed_json; invalid UTF-8 and tombstones too", () => {
  for (const value of [new TextEncoder().encode("[1,2"), new Uint8Array([0xff, 0xfe]), null]) {
    const d = decodeOne(message(value), ctx, () => {
      throw "not even an Error";
    });
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.rejection).toMatchObject({ reason: "malformed_json", field: null, payloadIsObject: false });
  }
});

test("without a throw the guard is decode itself", () => {
  const payload = new TextEncoder().encode(toJson(withFields({ raw_id: "guarded" })));
  expect(decodeOne(message(payload), ctx)).toEqual(decode(payload, ctx));
});
