// The MAC an envelope carries for its source (DLQ_PROVENANCE_KEY): it verifies for the record it was
// made for and for nothing else, and without the key nobody makes one that verifies.
import { expect, setDefaultTimeout, test } from "bun:test";
import { payloadDigest, ProvenanceKey } from "../../src/dlq/provenance-mac.ts";

setDefaultTimeout(60_000);

const key = new ProvenanceKey("a-secret-of-32-characters-length");
const digest = payloadDigest('{"raw_id":"r1"}');

test("a MAC verifies for its topic, partition, offset and payload, and for no other", () => {
  const mac = key.sign("cdr.raw", 2, 41, digest);
  expect(key.verify("cdr.raw", 2, 41, digest, mac)).toBe(true);
  expect(key.verify("cdr.raw", 2, 42, digest, mac)).toBe(false);
  expect(key.verify("cdr.raw", 1, 41, digest, mac)).toBe(false);
  expect(key.verify("cdr.other", 2, 41, digest, mac)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, payloadDigest('{"raw_id":"r2"}'), mac)).toBe(false);
});

test("another key's MAC, a malformed one or a malformed digest never verify", () => {
  const other = new ProvenanceKey("another-secret-of-32-characters");
  expect(key.verify("cdr.raw", 2, 41, digest, other.sign("cdr.raw", 2, 41, digest))).toBe(false);
  for (const mac of ["", "00", "zz".repeat(32), key.sign("cdr.raw", 2, 41, digest).toUpperCase()])
    expect(key.verify("cdr.raw", 2, 41, digest, mac)).toBe(false);
  expect(key.verify("cdr.raw", 2, 41, "not-a-digest", key.sign("cdr.raw", 2, 41, "not-a-digest"))).toBe(false);
});

test("a key shorter than 16 characters is refused", () => {
  expect(() => new ProvenanceKey("short")).toThrow("at least 16 characters");
});
