// A batch holds a scanned record's payload as its fetched bytes and gives it back as the text
// decode() would have held; rows of both kinds sit side by side, each insertable alone.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../../src/cdr/phone.ts";
import { scanRecord } from "../../../src/cdr/record-scan.ts";
import { RowBinaryBuffer } from "../../../src/clickhouse/row-binary.ts";
import { Batch } from "../../../src/delivery/batch/batch.ts";
import { toJson, withFields } from "../../fixtures/records.ts";

setDefaultTimeout(60_000);

const phone = new PhoneNormalizer({ cacheSize: 100 });
const enc = new TextEncoder();

test("scanned and decoded rows side by side: same body bytes, payloads back as text, stats fields kept", () => {
  const scannedText = toJson(withFields({ raw_id: "scanned", svc: "sms", rat: 9 }));
  const decodedText = toJson(withFields({ raw_id: "dé-coded", svc: "data", rat: 1 })); // non-ASCII: decode()'s
  const slab = enc.encode(scannedText + decodedText);
  const scannedBytes = slab.subarray(0, enc.encode(scannedText).length);
  const scanned = scanRecord(scannedBytes, phone);
  const decoded = decode(slab.subarray(scannedBytes.length), { phone });
  if (scanned === null || !decoded.ok) throw new Error("fixtures: one scanned, one decoded record");
  expect(scanRecord(slab.subarray(scannedBytes.length), phone)).toBeNull();

  const batch = new Batch(4, new RowBinaryBuffer(16));
  batch.addScanned(scanned, 1_700_000_000, 2, 40, 123);
  batch.add(decoded.row, 1_700_000_000, decoded.payload, 2, 41);
  expect(batch.count).toBe(2);
  expect(batch.payload(0)).toBe(scannedText);
  expect(batch.payload(1)).toBe(decodedText);
  expect([batch.services[0], batch.services[1]]).toEqual(["sms", "data"]);
  expect([batch.rats[0], batch.rats[1]]).toEqual([9, 1]);
  expect(batch.timestamps[0]).toBe(123);
  expect(batch.bytes).toBe(batch.body.length + scannedBytes.length + decodedText.length);

  const ref = new RowBinaryBuffer(16);
  const first = decode(scannedBytes, { phone });
  if (!first.ok) throw new Error("the scanned record is valid");
  ref.add(first.row, 1_700_000_000, 2, 40);
  expect(Buffer.from(batch.rows(0, 1))).toEqual(Buffer.from(ref.bytes()));
});

test("a scanned payload over 2 KiB is copied: it does not keep its poll's bytes alive", () => {
  const small = scanRecord(enc.encode(toJson(withFields({}))), phone);
  const large = scanRecord(enc.encode(toJson(withFields({ device_id: "d".repeat(3000) }))), phone);
  if (small === null || large === null) throw new Error("fixtures scan");
  const batch = new Batch(2, new RowBinaryBuffer(16));
  batch.addScanned(small, 0, 0, 0);
  batch.addScanned(large, 0, 0, 1);
  expect((batch.payloads[0] as Uint8Array).buffer).toBe(small.bytes.buffer);
  expect((batch.payloads[1] as Uint8Array).buffer).not.toBe(large.bytes.buffer);
  expect(batch.payload(1)).toBe(large.payload());
  batch.reset();
  expect(batch.payloads[0]).toBeUndefined();
});
