// A DLQ record as a row: where its source was, and whether the worker's MAC proves the envelope
// (1), disproves it (0) or was not there to check (null), as the table's `mac_verified` says.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope, encodeEnvelopeOf, HEADERS, provenanceHeaders } from "../../src/dlq/envelope.ts";
import { readEnvelope } from "../../src/dlq/reader.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";
import { payloadDigest, ProvenanceKey, SOURCE_MAC_VERSION } from "../../src/dlq/provenance-mac.ts";
import { dateTimeText, dlqRow, failedAtText, FIELD_CAPS, rowBytes } from "../../src/dlq-table/row.ts";
import { HOSTILE_DLQ } from "../fixtures/hostile-dlq.ts";
import type { Message } from "../../src/kafka/message.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const scope = { group: "cdr-worker", dlqTopic: "cdr.raw.dlq", table: "cdr.cdr_records" };
const key = new ProvenanceKey("a-secret-of-32-characters-length", scope);
const other = new ProvenanceKey("another-secret-of-32-characters!", scope);
const PAYLOAD = '{"raw_id":"r-1","caller_num":"+4915112345678", oops';

/**
 * The worker's envelope of PAYLOAD from cdr.raw[2]@41, signed by `signer` as the worker signs it;
 * `value` replaces its text after signing; `sourceForm` signs it in the older form (the source only).
 */
function record(opts: { signer?: ProvenanceKey; value?: string; sourceForm?: boolean } = {}): Message {
  const text = encodeEnvelope({ reason: "malformed_json", field: null, payload: PAYLOAD, payloadIsObject: false }, new Date(0), "w");
  const provenance = { topic: "cdr.raw", partition: 2, offset: 41, stage: "decode", detail: "d" } as const;
  const digest = payloadDigest(PAYLOAD);
  const headers = opts.sourceForm
    ? provenanceHeaders({ ...provenance, proof: { digest, version: SOURCE_MAC_VERSION, mac: opts.signer!.sign("cdr.raw", 2, 41, digest) } })
    : envelopeHeaders(provenance, text, PAYLOAD, opts.signer);
  const value = opts.value ?? text;
  return { topic: "cdr.raw.dlq", partition: 0, offset: 7, timestamp: -1, key: null, value: enc.encode(value), headers: headers.map(([k, v]) => [k, enc.encode(v)]) };
}

const row = (m: Message, withKey = true) => dlqRow(m, { storedAt: 0, ...(withKey ? { key } : {}) });

test("an envelope the worker signed: its source from the headers, its payload's digest, mac_verified 1", () => {
  expect(row(record({ signer: key }))).toMatchObject({
    source_topic: "cdr.raw",
    source_partition: 2,
    source_offset: 41,
    payload_sha256: payloadDigest(PAYLOAD),
    mac_verified: 1,
    unreadable: "",
  });
});

test("a MAC of another key, a copy with its reason changed, or an older form's proof of the source alone is 0; no key or no MAC leaves it unchecked (null)", () => {
  expect(row(record({ signer: other })).mac_verified).toBe(0);
  const text = encodeEnvelope({ reason: "malformed_json", field: null, payload: PAYLOAD, payloadIsObject: false }, new Date(0), "w");
  expect(row(record({ signer: key, value: text.replace("malformed_json", "invalid_rat_value") }))).toMatchObject({ failure_reason: "invalid_rat_value", mac_verified: 0 });
  expect(row(record({ signer: key, sourceForm: true })).mac_verified).toBe(0);
  expect(row(record({ signer: key }), false).mac_verified).toBeNull();
  expect(row(record()).mac_verified).toBeNull();
});

test("a record that is not an envelope keeps the source its headers name, unchecked", () => {
  expect(row(record({ signer: key, value: "not json" }))).toMatchObject({
    source_topic: "cdr.raw",
    source_partition: 2,
    source_offset: 41,
    payload_sha256: payloadDigest("not json"),
    mac_verified: null,
    unreadable: "not JSON",
  });
});

test.each(HOSTILE_DLQ.map((h) => [h.what, h] as const))("every record becomes a row ClickHouse takes: %s", (_what, h) => {
  const r = row(h.message, false);
  for (const [k, v] of Object.entries(r)) if (typeof v === "string") expect({ [k]: v.isWellFormed() }).toEqual({ [k]: true });
  expect(Number.isSafeInteger(r.source_offset) && r.source_partition >= -(2 ** 31) && r.source_partition < 2 ** 31).toBe(true);
  expect(r.attempts === null || (r.attempts >= 0 && r.attempts <= 2 ** 32 - 1)).toBe(true);
  expect(r.unreadable).toMatch(h.mended);
});

test("every text field is capped, the cut said in unreadable and never inside a surrogate pair; rowBytes counts every field", () => {
  const enc = new TextEncoder();
  const worker = "w".repeat(FIELD_CAPS.worker_instance - 1) + "😀".repeat(10); // the cap falls inside a pair
  const value = enc.encode(encodeEnvelope({ reason: "malformed_json", field: "f".repeat(100_000), payload: "{", payloadIsObject: false }, new Date(0), worker));
  // As anyone who may write to the DLQ topic writes them: the worker's own detail is at most a line.
  const headers = provenanceHeaders({ topic: "t".repeat(1_000), partition: 0, offset: 1, stage: "decode", detail: "why" })
    .map(([k, v]) => [k, enc.encode(k === HEADERS.detail ? "d".repeat(200_000) : v)] as [string, Uint8Array]);
  const row = dlqRow({ topic: "cdr.raw.dlq", partition: 0, offset: 5, timestamp: -1, value, key: null, headers }, { storedAt: 0 });
  expect([row.failed_field!.length, row.source_topic.length, row.error_detail.length]).toEqual([FIELD_CAPS.failed_field, FIELD_CAPS.source_topic, FIELD_CAPS.error_detail]);
  expect(row.worker_instance).toBe("w".repeat(FIELD_CAPS.worker_instance - 1));
  expect(row.worker_instance.isWellFormed()).toBe(true);
  expect(row.unreadable).toContain("failed_field: cut at 256 of its 100000 characters");
  expect(row.unreadable).toContain("error_detail: cut at 65536 of its 200000 characters");
  expect(row.unreadable).not.toContain("lone surrogate");
  const chars = Object.values(row).reduce((s: number, v) => s + (typeof v === "string" ? v.length : 0), 0);
  // Every text column counted (the DateTime columns' few characters go in the 512).
  expect(rowBytes(row)).toBeGreaterThanOrEqual(chars - row.failed_at.length - row.stored_at.length - row.payload_sha256.length);
  expect(rowBytes(row)).toBeLessThan(FIELD_CAPS.error_detail + 10_000);
});

// failed_at's text is read from the worker's ISO form without a Date; it must be what the Date
// route gives for every text, the worker's and any other a writer puts there.
test("failed_at's DateTime text is the Date route's, for the worker's ISO form and for any other text", () => {
  const viaDate = (iso: string) => dateTimeText(Date.parse(iso) / 1000);
  const texts: string[] = [];
  for (let i = 0; i < 5_000; i++) texts.push(new Date(Math.floor(Math.random() * 4.5e12)).toISOString());
  texts.push(
    "1970-01-01T00:00:00.000Z", "2105-12-31T23:59:59.999Z", "2106-02-07T06:28:15.000Z", "2200-01-01T00:00:00.000Z",
    "1969-12-31T23:59:59.999Z", "2024-02-29T12:00:00Z", "2023-02-29T12:00:00.000Z", "2100-02-29T00:00:00.000Z",
    "2000-02-29T00:00:00.5Z", "2024-04-31T00:00:00.000Z", "2024-13-01T00:00:00.000Z", "2024-00-10T00:00:00.000Z",
    "2024-01-00T00:00:00.000Z", "2024-01-01T24:00:00.000Z", "2024-01-01T23:60:00.000Z", "2024-01-01T23:59:60.000Z",
    "2024-01-01T10:00:00.000+02:00", "2024-01-01 10:00:00", "not a time", "", "2024-01-01T10:00:00.123456789Z",
  );
  for (const iso of texts) expect({ iso, text: failedAtText(iso) }).toEqual({ iso, text: viaDate(iso) });
});

// A proven envelope's row takes its digest from the worker's header instead of hashing the payload
// again: it must be the digest of the payload the row holds, for every form the worker writes; a
// cut payload's row hashes what it holds.
test("a proven envelope's payload_sha256 is its payload's, for objects, texts, payloads past common readers and cut ones", () => {
  const deep = `{"raw_id":"r","x":${"[".repeat(2_000)}${"]".repeat(2_000)}}`;
  const inputs = [
    { reason: "invalid_rat_value", field: "rat", payload: '{"raw_id":"r","rat":7,"up":18446744073709551615}', payloadIsObject: true },
    { reason: "malformed_json", field: null, payload: PAYLOAD, payloadIsObject: false },
    { reason: "malformed_json", field: null, payload: deep, payloadIsObject: true },
    { reason: "malformed_json", field: null, payload: "x".repeat(2 * 1024 * 1024), payloadIsObject: false },
    { reason: "malformed_json", field: null, payload: "y".repeat(1000), payloadIsObject: false, wholeBytes: 20_000_000 },
  ] as const;
  for (const input of inputs) {
    const { text, truncated, asText } = encodeEnvelopeOf(input, new Date(0), "w");
    const provenance = { topic: "cdr.raw", partition: 2, offset: 41, stage: "decode", detail: "d", truncated, asText } as const;
    const headers = envelopeHeaders(provenance, text, input.payload, key).map(([k, v]) => [k, enc.encode(v)] as [string, Uint8Array]);
    const m: Message = { topic: "cdr.raw.dlq", partition: 0, offset: 7, timestamp: -1, key: null, value: enc.encode(text), headers };
    const read = readEnvelope(m);
    if (typeof read === "string") throw new Error(read);
    const r = row(m);
    const what = { payload: input.payload.slice(0, 40), truncated };
    expect({ ...what, mac: r.mac_verified, digest: r.payload_sha256 }).toEqual({ ...what, mac: 1, digest: payloadDigest(read.payloadText) });
  }
});
