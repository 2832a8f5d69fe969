import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { encodeEnvelope, isTruncated, MAX_PAYLOAD_CHARS, provenanceHeaders } from "../../src/dlq/envelope.ts";
import { DLQ_MAX_MESSAGE_BYTES } from "../../src/topics/topology.ts";

setDefaultTimeout(60_000);

const ctx = { phone: new PhoneNormalizer() };
const at = new Date("2026-01-02T03:04:05.678Z");

function envelopeOf(text: string) {
  const d = decode(text, ctx);
  if (d.ok) throw new Error("expected rejection");
  return JSON.parse(encodeEnvelope(d.rejection, at, "worker-1"));
}

test("DLQ envelope structure enforced: exactly the five fields", () => {
  const env = envelopeOf('{"raw_id":"a"}');
  expect(Object.keys(env).sort()).toEqual(["failed_at", "failed_field", "failure_reason", "original_payload", "worker_instance"]);
  expect(env).toEqual({ original_payload: { raw_id: "a" }, failure_reason: "missing_required_field", failed_field: "device_id", failed_at: "2026-01-02T03:04:05.678Z", worker_instance: "worker-1" });
});

test("malformed payloads travel as a string, object payloads as the object with exact digits", () => {
  expect(envelopeOf("{nope").original_payload).toBe("{nope");
  expect(envelopeOf("[1,2]").original_payload).toBe("[1,2]");
  const text = '{"raw_id":"a","up_bytes":18446744073709551615}';
  const raw = encodeEnvelope({ reason: "normalization_error", field: null, payload: text, payloadIsObject: true }, at, "w");
  expect(raw).toContain('"original_payload":{"raw_id":"a","up_bytes":18446744073709551615}');
});

test("failed_at is ISO 8601 UTC", () => {
  expect(envelopeOf("x").failed_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test("provenance headers carry source topic, partition, offset, stage, detail and attempts", () => {
  expect(Object.fromEntries(provenanceHeaders({ topic: "cdr.raw", partition: 2, offset: 41, stage: "clickhouse-failed", detail: "why", attempts: 3 }))).toEqual({
    "dlq.source.topic": "cdr.raw", "dlq.source.partition": "2", "dlq.source.offset": "41", "dlq.error.stage": "clickhouse-failed",
    "dlq.error.detail": "why", "dlq.error.attempts": "3",
  });
});

test("every record the raw topic admits (1 MiB) keeps its whole payload, as an object or as an escaped string", () => {
  const object = '{"raw_id":"' + "x".repeat(1_000_000) + '"}';
  const asObject = JSON.parse(encodeEnvelope({ reason: "normalization_error", field: null, payload: object, payloadIsObject: true }, at, "w"));
  expect(asObject.original_payload.raw_id.length).toBe(1_000_000);
  const text = "\u0001".repeat(1_000_000); // every character escapes to six
  const encoded = encodeEnvelope({ reason: "malformed_json", field: null, payload: text, payloadIsObject: false }, at, "w");
  expect(JSON.parse(encoded).original_payload).toBe(text);
  expect(Buffer.byteLength(encoded)).toBeLessThan(DLQ_MAX_MESSAGE_BYTES);
  expect(isTruncated(object) || isTruncated(text)).toBe(false);
});

test("a payload larger than the raw topic admits travels truncated as a string, flagged in a header", () => {
  const big = '{"raw_id":"' + "x".repeat(1_100_000) + '"}';
  const env = JSON.parse(encodeEnvelope({ reason: "normalization_error", field: "raw_id", payload: big, payloadIsObject: true }, at, "w"));
  expect(typeof env.original_payload).toBe("string");
  expect(env.original_payload.length).toBeLessThan(MAX_PAYLOAD_CHARS + 100);
  expect(env.original_payload).toEndWith(`…[truncated: ${big.length} characters in all]`);
  expect(Object.fromEntries(provenanceHeaders({ topic: "t", partition: 0, offset: 1, stage: "decode", detail: "d", truncated: true }))["dlq.payload.truncated"]).toBe("true");
});

test("a record over RECORD_MAX_BYTES travels as its first bytes, marked truncated with its size, and is never parsed", () => {
  const phone = new PhoneNormalizer();
  const whole = new TextEncoder().encode(`{"raw_id":"big","pad":"${"x".repeat(3 * MAX_PAYLOAD_CHARS)}"}`);
  const d = decode(whole, { phone, recordMaxBytes: 2 * MAX_PAYLOAD_CHARS });
  expect(d.ok).toBe(false);
  if (d.ok) return;
  expect(d.rejection).toMatchObject({ reason: "normalization_error", field: null, payloadIsObject: false, wholeBytes: whole.length });
  expect(d.rejection.detail).toBe(`the record's ${whole.length} bytes are over RECORD_MAX_BYTES (${2 * MAX_PAYLOAD_CHARS})`);
  expect(d.rejection.payload.length).toBe(MAX_PAYLOAD_CHARS);
  const e = JSON.parse(encodeEnvelope(d.rejection, new Date(0), "w"));
  expect(e.original_payload).toEndWith(`…[truncated: ${whole.length} bytes in all]`);
  expect(e.original_payload.startsWith('{"raw_id":"big","pad":"xxx')).toBe(true);
  // At the limit it is read as any record: here, a valid JSON object missing its fields.
  const at = decode(whole, { phone, recordMaxBytes: whole.length });
  expect(!at.ok && at.rejection.reason).toBe("missing_required_field");
});
