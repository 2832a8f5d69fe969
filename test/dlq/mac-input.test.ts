// Form 3's input laid out in one buffer is byte for byte the parts hashed one by one, as the format
// is documented (provenance-mac.ts): for values of every size (past the in-place split too), null,
// text beyond ASCII, headers as bytes or text, in any order; a repeated worker header feeds nothing
// and leaves nothing behind for the next record.
import { expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { feedMacInput, type Header } from "../../src/dlq/mac-input.ts";

setDefaultTimeout(60_000);

const KEY = "a-secret-of-32-characters-length";
const enc = new TextEncoder();
const PREFIX = "v3\ngroup\ncdr.raw.dlq\ncdr.cdr_records\ncdr.raw\n2\n41\n" + "ab".repeat(32) + "\n";

/** The documented input, a part at a time. */
function reference(value: Uint8Array | string | null, headers: readonly Header[]): string {
  const h = createHmac("sha256", KEY).update(PREFIX);
  const v = typeof value === "string" ? enc.encode(value) : value;
  h.update(`value ${v === null ? -1 : v.length}\n`);
  if (v !== null) h.update(v);
  const signed = headers.filter(([k]) => Object.values(HEADERS).includes(k as never) && k !== HEADERS.sourceMac);
  for (const [k, raw] of [...signed].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const b = typeof raw === "string" ? enc.encode(raw) : raw;
    h.update(`${k} ${b.length}\n`).update(b);
  }
  return h.digest("hex");
}

function fed(value: Uint8Array | string | null, headers: readonly Header[]): string | null {
  const h = new Bun.CryptoHasher("sha256", KEY);
  return feedMacInput(h, PREFIX, value, headers) ? h.digest("hex") : null;
}

const HEADERS_OF_A_WORKER: Header[] = [
  [HEADERS.sourceTopic, "cdr.raw"],
  [HEADERS.sourcePartition, enc.encode("2")],
  [HEADERS.sourceOffset, "41"],
  [HEADERS.stage, enc.encode("decode")],
  [HEADERS.detail, "rat: 7 is not a radio access type — Zürich 東京"],
  [HEADERS.attempts, enc.encode("")],
  [HEADERS.sourceDigest, "ab".repeat(32)],
  [HEADERS.macVersion, "3"],
  [HEADERS.sourceMac, "cd".repeat(32)],
  ["traceparent", enc.encode("00-abc")],
];

test("the input in one buffer is the parts hashed one by one, for values of every size and headers in any order", () => {
  const values: Array<Uint8Array | string | null> = [
    null,
    "",
    '{"raw_id":"r1","city":"Zürich 東京 \u{1F4DE}"}',
    enc.encode("x".repeat(64)),
    enc.encode("y".repeat(65)),
    "z".repeat(64 * 1024),
    enc.encode("w".repeat(64 * 1024 + 1)),
    "é".repeat(3 * 1024 * 1024),
  ];
  for (const value of values)
    for (const headers of [HEADERS_OF_A_WORKER, [...HEADERS_OF_A_WORKER].reverse(), [], [[HEADERS.detail, "d".repeat(100_000)] as Header], [[HEADERS.detail, "ü".repeat(1_000_000)] as Header]]) {
      const size = value === null ? -1 : value.length;
      expect({ size, headers: headers.length, mac: fed(value, headers) }).toEqual({ size, headers: headers.length, mac: reference(value, headers) });
    }
});

test("a worker header repeated feeds nothing, and the next record's input holds none of it", () => {
  const sink = { parts: 0, update: () => sink.parts++ };
  const repeated: Header[] = [...HEADERS_OF_A_WORKER, [HEADERS.stage, "clickhouse-refused"]];
  expect(feedMacInput(sink, PREFIX, "v", repeated)).toBe(false);
  expect(sink.parts).toBe(0);
  // A foreign header repeated changes nothing.
  expect(fed("v", [...HEADERS_OF_A_WORKER, ["traceparent", "00-def"]])).toBe(reference("v", HEADERS_OF_A_WORKER));
  expect(fed("v", [[HEADERS.stage, "decode"]])).toBe(reference("v", [[HEADERS.stage, "decode"]]));
});

test("a prefix beyond ASCII is its UTF-8, a lone surrogate as U+FFFD, as the hasher writes a string", () => {
  for (const prefix of ["v3\ngroup-ü\nd\nt\ncdr.räw\n0\n1\nab\n", "v3\ng\nd\nt\nx\uD800y\n0\n1\nab\n", "ü"]) {
    const h = new Bun.CryptoHasher("sha256", KEY);
    expect(feedMacInput(h, prefix, "v", [])).toBe(true);
    expect(h.digest("hex")).toBe(createHmac("sha256", KEY).update(prefix).update("value 1\nv").digest("hex"));
  }
});
