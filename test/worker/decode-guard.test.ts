// A stage that throws costs one record, never the worker: the record becomes a rejection.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode, type DecodeContext } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { ScannedRow, scanRecord } from "../../src/cdr/record-scan.ts";
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
// Either stage throwing: the scanner on the record it would take, decode() on the ones it declines.
const scanThrows = { scan: throwing, decode };
const decodeThrows = { scan: () => null, decode: throwing };

test("a decoder that throws on a JSON object yields normalization_error with the error's text, payload kept as an object", () => {
  const payload = new TextEncoder().encode(toJson(withFields({})));
  for (const stages of [scanThrows, decodeThrows]) {
    const d = decodeOne(message(payload), ctx, stages);
    if (d.ok) throw new Error("a throw became a row");
    expect(d.rejection).toMatchObject({ reason: "normalization_error", field: null, payloadIsObject: true });
    expect(d.rejection.detail).toBe("decoding threw: RangeError: Maximum call stack size exceeded.");
    expect(d.rejection.payload).toBe(new TextDecoder().decode(payload));
  }
});

test("a decoder that throws on what is not a JSON object yields malformed_json; invalid UTF-8 and tombstones too", () => {
  for (const value of [new TextEncoder().encode("[1,2"), new Uint8Array([0xff, 0xfe]), null]) {
    const notAnError = () => {
      throw "not even an Error";
    };
    const d = decodeOne(message(value), ctx, { scan: notAnError, decode: notAnError });
    if (d.ok) throw new Error("a throw became a row");
    expect(d.rejection).toMatchObject({ reason: "malformed_json", field: null, payloadIsObject: false });
  }
});

test("without a throw: the scanned row for a common valid record, decode()'s verdict for the rest", () => {
  const payload = new TextEncoder().encode(toJson(withFields({ raw_id: "guarded" })));
  const scanned = decodeOne(message(payload), ctx);
  expect(scanned).toBeInstanceOf(ScannedRow);
  const ref = decode(payload, ctx);
  if (!ref.ok) throw new Error("the record is valid");
  expect((scanned as ScannedRow).toRow()).toEqual(ref.row);
  for (const other of [withFields({ raw_id: "esc\\aped" }), withFields({ rat: 2 }), withFields({ ci: undefined })]) {
    const bytes = new TextEncoder().encode(toJson(other));
    expect(scanRecord(bytes, ctx.phone)).toBeNull();
    expect(decodeOne(message(bytes), ctx)).toEqual(decode(bytes, ctx));
  }
});
