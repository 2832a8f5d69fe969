// The MAC an envelope carries for its source (DLQ_PROVENANCE_KEY): it verifies for the record it was
// made for, in the group, DLQ topic and table it was made in, and for nothing else; without the
// key nobody makes one that verifies. Keys rotate: a previous key verifies and never signs.
import { expect, setDefaultTimeout, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { MAC_VERSION, payloadDigest, ProvenanceKey } from "../../src/dlq/provenance-mac.ts";

setDefaultTimeout(60_000);

const SECRET = "a-secret-of-32-characters-length";
const scope = { group: "cdr-worker", dlqTopic: "cdr.raw.dlq", table: "cdr.cdr_records" };
const key = new ProvenanceKey(SECRET, scope);
const digest = payloadDigest('{"raw_id":"r1"}');

test("a MAC verifies for its topic, partition, offset and payload, and for no other", () => {
  const mac = key.sign("cdr.raw", 2, 41, digest);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, MAC_VERSION)).toBe(true);
  expect(key.verify("cdr.raw", 2, 42, digest, mac, MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 1, 41, digest, mac, MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.other", 2, 41, digest, mac, MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, payloadDigest('{"raw_id":"r2"}'), mac, MAC_VERSION)).toBe(false);
});

test("the MAC binds the group, the DLQ topic and the table: workers sharing a key across groups do not accept each other's", () => {
  const mac = key.sign("cdr.raw", 2, 41, digest);
  for (const other of [{ group: "another-group" }, { dlqTopic: "other.dlq" }, { table: "cdr.other_table" }])
    expect(new ProvenanceKey(SECRET, { ...scope, ...other }).verify("cdr.raw", 2, 41, digest, mac, MAC_VERSION)).toBe(false);
  // A MAC of the first form, made before the version header existed, verifies as that form only.
  const first = createHmac("sha256", SECRET).update(`cdr.raw\n2\n41\n${digest}`).digest("hex");
  expect(key.verify("cdr.raw", 2, 41, digest, first, undefined)).toBe(true);
  expect(key.verify("cdr.raw", 2, 41, digest, first, MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, undefined)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, digest, mac, "3")).toBe(false);
});

test("another key's MAC, a malformed one or a malformed digest never verify", () => {
  const other = new ProvenanceKey("another-secret-of-32-characters!", scope);
  expect(key.verify("cdr.raw", 2, 41, digest, other.sign("cdr.raw", 2, 41, digest), MAC_VERSION)).toBe(false);
  for (const mac of ["", "00", "zz".repeat(32), key.sign("cdr.raw", 2, 41, digest).toUpperCase()])
    expect(key.verify("cdr.raw", 2, 41, digest, mac, MAC_VERSION)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, "not-a-digest", key.sign("cdr.raw", 2, 41, "not-a-digest"), MAC_VERSION)).toBe(false);
});

test("rotation: the new key signs; the previous one verifies what it signed, both forms, and signs nothing", () => {
  const old = new ProvenanceKey(SECRET, scope);
  const rotated = new ProvenanceKey("the-next-secret-of-32-characters", scope, [SECRET]);
  const before = old.sign("cdr.raw", 0, 7, digest);
  expect(rotated.verify("cdr.raw", 0, 7, digest, before, MAC_VERSION)).toBe(true);
  const after = rotated.sign("cdr.raw", 0, 8, digest);
  expect(after).not.toBe(old.sign("cdr.raw", 0, 8, digest));
  expect(old.verify("cdr.raw", 0, 8, digest, after, MAC_VERSION)).toBe(false);
  // Without the previous key the old envelopes no longer verify: the rotation needs it.
  expect(new ProvenanceKey("the-next-secret-of-32-characters", scope).verify("cdr.raw", 0, 7, digest, before, MAC_VERSION)).toBe(false);
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
    .update(`v${MAC_VERSION}\n${scope.group}\n${scope.dlqTopic}\n${scope.table}\ncdr.raw\n2\n41\n${d}`)
    .digest("hex");
  expect(key.sign("cdr.raw", 2, 41, d)).toBe(v2);
});
