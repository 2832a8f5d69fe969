// The MAC an envelope carries for its source (DLQ_PROVENANCE_KEY): it verifies for the record it was
// made for, in the group, DLQ topic and table it was made in, and for nothing else; without the
// key nobody makes one that verifies. Keys rotate: a previous key verifies and never signs.
import { expect, setDefaultTimeout, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { MAC_VERSION, payloadDigest, ProvenanceKey, SOURCE_MAC_VERSION } from "../../src/dlq/provenance-mac.ts";
import { encodeEnvelope, HEADERS } from "../../src/dlq/envelope.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";

setDefaultTimeout(60_000);

const SECRET = "a-secret-of-32-characters-length";
const scope = { group: "cdr-worker", dlqTopic: "cdr.raw.dlq", table: "cdr.cdr_records" };
const key = new ProvenanceKey(SECRET, scope);
const digest = payloadDigest('{"raw_id":"r1"}');

test("a MAC verifies for its topic, partition, offset and payload, and for no other", () => {
  const mac = key.sign("cdr.raw", 2, 41, digest);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, SOURCE_MAC_VERSION)).toBe(true);
  expect(key.verify("cdr.raw", 2, 42, digest, mac, SOURCE_MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 1, 41, digest, mac, SOURCE_MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.other", 2, 41, digest, mac, SOURCE_MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, payloadDigest('{"raw_id":"r2"}'), mac, SOURCE_MAC_VERSION)).toBe(false);
});

test("the MAC binds the group, the DLQ topic and the table: workers sharing a key across groups do not accept each other's", () => {
  const mac = key.sign("cdr.raw", 2, 41, digest);
  for (const other of [{ group: "another-group" }, { dlqTopic: "other.dlq" }, { table: "cdr.other_table" }])
    expect(new ProvenanceKey(SECRET, { ...scope, ...other }).verify("cdr.raw", 2, 41, digest, mac, SOURCE_MAC_VERSION)).toBe(false);
  // A MAC of the first form, made before the version header existed, verifies as that form only.
  const first = createHmac("sha256", SECRET).update(`cdr.raw\n2\n41\n${digest}`).digest("hex");
  expect(key.verify("cdr.raw", 2, 41, digest, first, undefined)).toBe(true);
  expect(key.verify("cdr.raw", 2, 41, digest, first, SOURCE_MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, undefined)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, "3")).toBe(false);
});

test("another key's MAC, a malformed one or a malformed digest never verify", () => {
  const other = new ProvenanceKey("another-secret-of-32-characters!", scope);
  expect(key.verify("cdr.raw", 2, 41, digest, other.sign("cdr.raw", 2, 41, digest), SOURCE_MAC_VERSION)).toBe(false);
  for (const mac of ["", "00", "zz".repeat(32), key.sign("cdr.raw", 2, 41, digest).toUpperCase()])
    expect(key.verify("cdr.raw", 2, 41, digest, mac, SOURCE_MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, "not-a-digest", key.sign("cdr.raw", 2, 41, "not-a-digest"), SOURCE_MAC_VERSION)).toBe(false);
});

test("rotation: the new key signs; the previous one verifies what it signed, both forms, and signs nothing", () => {
  const old = new ProvenanceKey(SECRET, scope);
  const rotated = new ProvenanceKey("the-next-secret-of-32-characters", scope, [SECRET]);
  const before = old.sign("cdr.raw", 0, 7, digest);
  expect(rotated.verify("cdr.raw", 0, 7, digest, before, SOURCE_MAC_VERSION)).toBe(true);
  const after = rotated.sign("cdr.raw", 0, 8, digest);
  expect(after).not.toBe(old.sign("cdr.raw", 0, 8, digest));
  expect(old.verify("cdr.raw", 0, 8, digest, after, SOURCE_MAC_VERSION)).toBe(false);
  // Without the previous key the old envelopes no longer verify: the rotation needs it.
  expect(new ProvenanceKey("the-next-secret-of-32-characters", scope).verify("cdr.raw", 0, 7, digest, before, SOURCE_MAC_VERSION)).toBe(false);
});

test("a signing key shorter than 32 characters is refused; a previous key needs the 16 keys needed before", () => {
  expect(() => new ProvenanceKey("x".repeat(31), scope)).toThrow("at least 32 characters");
  expect(() => new ProvenanceKey(SECRET, scope, ["x".repeat(15)])).toThrow("each at least 16 characters");
  expect(() => new ProvenanceKey(SECRET, scope, ["x".repeat(16)])).not.toThrow();
});

// Envelopes already in the DLQ were signed through node:crypto: the digest and both MAC forms must
// stay byte for byte what it computes, for text beyond ASCII too.
test("the digest and the MAC are node:crypto's SHA-256 and HMAC-SHA256 of the UTF-8 text", () => {
  expect(payloadDigest("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const payload = '{"raw_id":"r1","note":"Zürich 東京 \u{1F4DE}"}';
  expect(payloadDigest(payload)).toBe(createHash("sha256").update(payload, "utf8").digest("hex"));
  // A lone surrogate, which no UTF-8 holds: both write U+FFFD, neither throws.
  for (const odd of ["\uD800", "a\uDFFFb"]) expect(payloadDigest(odd)).toBe(createHash("sha256").update(odd, "utf8").digest("hex"));
  const d = payloadDigest(payload);
  const v2 = createHmac("sha256", SECRET)
    .update(`v${SOURCE_MAC_VERSION}\n${scope.group}\n${scope.dlqTopic}\n${scope.table}\ncdr.raw\n2\n41\n${d}`)
    .digest("hex");
  expect(key.sign("cdr.raw", 2, 41, d)).toBe(v2);
});

// The current form: the MAC covers the whole envelope as it lies in the DLQ topic, its text and
// every header the worker writes, so a copy with any field changed proves nothing.
const enc = new TextEncoder();
const PAYLOAD = '{"raw_id":"r1","rat":7}';
const source = { topic: "cdr.raw", partition: 2, offset: 41, stage: "decode" as const, detail: "rat: 7 is not a radio access type" };

/** The worker's envelope of PAYLOAD as it lies in the topic: bytes, headers as bytes. */
function written(signer = key, value = encodeEnvelope({ reason: "invalid_rat_value", field: "rat", payload: PAYLOAD, payloadIsObject: true }, new Date(0), "w-1"), detail = source.detail) {
  const headers = envelopeHeaders({ ...source, detail }, value, PAYLOAD, signer);
  return { value: enc.encode(value), text: value, headers: headers.map(([k, v]) => [k, enc.encode(v)] as [string, Uint8Array]) };
}
const srcOf = (headers: ReadonlyArray<readonly [string, Uint8Array]>) => {
  const h = Object.fromEntries(headers.map(([k, v]) => [k, new TextDecoder().decode(v)]));
  return { topic: h[HEADERS.sourceTopic]!, partition: Number(h[HEADERS.sourcePartition]), offset: Number(h[HEADERS.sourceOffset]), digest: h[HEADERS.sourceDigest], mac: h[HEADERS.sourceMac], macVersion: h[HEADERS.macVersion] };
};
const proof = (m: { value: Uint8Array | null; headers: ReadonlyArray<readonly [string, Uint8Array]> }, k = key) => k.proves(srcOf(m.headers), m);

test("the worker's envelope is proven whole, by the signing key and by a previous one, with version 3", () => {
  const m = written();
  expect(srcOf(m.headers).macVersion).toBe(MAC_VERSION);
  expect(MAC_VERSION).toBe("3");
  expect(proof(m)).toBe("whole");
  expect(proof(m, new ProvenanceKey("the-next-secret-of-32-characters", scope, [SECRET]))).toBe("whole");
  expect(proof(m, new ProvenanceKey("another-secret-of-32-characters!", scope))).toBeNull();
  expect(proof(m, new ProvenanceKey(SECRET, { ...scope, group: "another-group" }))).toBeNull();
});

// Envelopes already in the DLQ were signed in form 3 as documented: the input, spelled out here with
// node:crypto, stays byte for byte what the key computes (an envelope beyond ASCII, headers unsorted).
test("form 3 is node:crypto's HMAC-SHA256 of the documented input, each part with its length in bytes", () => {
  const value = encodeEnvelope({ reason: "invalid_rat_value", field: "rat", payload: '{"city":"Zürich 東京 \u{1F4DE}"}', payloadIsObject: true }, new Date(0), "w-ü");
  const m = written(key, value);
  const src = srcOf(m.headers);
  const h = createHmac("sha256", SECRET).update(
    `v3\n${scope.group}\n${scope.dlqTopic}\n${scope.table}\n${src.topic}\n${src.partition}\n${src.offset}\n${src.digest}\n`,
  );
  h.update(`value ${m.value.length}\n`).update(m.value);
  const signed = m.headers.filter(([k]) => k !== HEADERS.sourceMac).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [k, v] of signed) h.update(`${k} ${v.length}\n`).update(v);
  expect(src.mac).toBe(h.digest("hex"));
  expect(proof({ ...m, headers: [...m.headers].reverse() })).toBe("whole");
});

test("a copy with its reason, its time, any header changed, a worker header added or repeated proves nothing; a foreign header changes nothing", () => {
  const m = written();
  const other = enc.encode(m.text.replace("invalid_rat_value", "malformed_json"));
  expect(proof({ ...m, value: other })).toBeNull();
  expect(proof({ ...m, value: enc.encode(m.text.replace("1970-01-01", "1971-01-01")) })).toBeNull();
  expect(proof({ ...m, value: null })).toBeNull();
  for (const name of [HEADERS.stage, HEADERS.detail, HEADERS.sourceOffset, HEADERS.sourceDigest, HEADERS.macVersion]) {
    const changed = m.headers.map(([k, v]) => [k, k === name ? enc.encode(new TextDecoder().decode(v) + "0") : v] as [string, Uint8Array]);
    // The offset and digest read from the headers change with them: still nothing proven.
    expect({ name, proof: proof({ ...m, headers: changed }) }).toEqual({ name, proof: null });
  }
  for (const added of [[HEADERS.attempts, "3"], [HEADERS.truncated, "true"], [HEADERS.asText, "nesting"]] as const)
    expect({ added, proof: proof({ ...m, headers: [...m.headers, [added[0], enc.encode(added[1])]] }) }).toEqual({ added, proof: null });
  const stage = m.headers.find(([k]) => k === HEADERS.stage)!;
  expect(proof({ ...m, headers: [...m.headers, stage] })).toBeNull();
  expect(proof({ ...m, headers: [...m.headers, ["traceparent", enc.encode("00-abc")]] })).toBe("whole");
  expect(proof({ ...m, headers: [...m.headers].reverse() })).toBe("whole");
});

test("a detail cut inside a surrogate pair is written well-formed, and the bytes the producer sends verify", () => {
  const detail = "x".repeat(1023) + "\u{1F4DE}";
  const m = written(key, undefined, detail);
  const sent = new TextDecoder().decode(m.headers.find(([k]) => k === HEADERS.detail)![1]);
  expect(sent.endsWith("\uFFFD")).toBe(true);
  expect(proof(m)).toBe("whole");
});

test("the older forms prove the source only, and stop at the cutoff the operator sets", () => {
  const d = payloadDigest(PAYLOAD);
  const v2 = key.sign("cdr.raw", 2, 41, d);
  const first = createHmac("sha256", SECRET).update(`cdr.raw\n2\n41\n${d}`).digest("hex");
  const src = (mac: string, macVersion?: string) => ({ topic: "cdr.raw", partition: 2, offset: 41, digest: d, mac, ...(macVersion ? { macVersion } : {}) });
  const none = { value: null };
  expect(key.proves(src(v2, SOURCE_MAC_VERSION), none)).toBe("source");
  expect(key.proves(src(first), none)).toBe("source");
  let now = Date.parse("2027-01-14T23:59:59Z");
  const until = Date.parse("2027-01-15");
  const cut = new ProvenanceKey(SECRET, scope, [], { until, now: () => now });
  expect(cut.proves(src(v2, SOURCE_MAC_VERSION), none)).toBe("source");
  now = until;
  expect(cut.proves(src(v2, SOURCE_MAC_VERSION), none)).toBeNull();
  expect(cut.proves(src(first), none)).toBeNull();
  expect(cut.verify("cdr.raw", 2, 41, d, v2, SOURCE_MAC_VERSION)).toBe(false);
  // The current form is not cut off.
  const m = written();
  expect(proof(m, cut)).toBe("whole");
});
