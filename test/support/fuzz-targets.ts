/**
 * Every parser of outside bytes, as a fuzz target (harness: fuzz.ts): the record decoder, the DLQ
 * envelope reader, commit metadata, and the RowBinary reader the tests read ClickHouse's bodies with.
 *
 * The record generators compose hostile properties rather than try them one at a time: a record
 * from the parity corpora (phone verdicts from Python's phonenumbers, UUIDv5 names) takes up to
 * five structural changes (nesting beside and inside fields, numbers at and past 2^53, 2^64 and the
 * float limits, duplicate, escaped and prototype keys, hostile strings) and then up to two byte-level
 * ones (a BOM, invalid UTF-8, NULs, a flipped byte, a truncation). Each record drives both the
 * worker's single pass (record-scan.ts) and decode(), which must agree.
 */
import fc from "fast-check";
import { dlqRow } from "../../src/dlq-table/row.ts";
import { DlqRowBinary } from "../../src/dlq-table/row-binary.ts";
import { withoutUserInfo } from "../../src/redaction/url-mask.ts";
import { parsePredicate, PredicateError, predicateSql } from "../../src/dlq-table/predicate.ts";
import { decode, type Decoded } from "../../src/cdr/decode.ts";
import { FAILURE_REASONS } from "../../src/cdr/fields.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { scanRecord } from "../../src/cdr/record-scan.ts";
import { classifyInsertError, refusal } from "../../src/clickhouse/insert-error.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { formatRow } from "../../src/clickhouse/row-format.ts";
import { commitMetadata, readCommitMetadata } from "../../src/delivery/offsets/commit-metadata.ts";
import { encodeEnvelope, encodeEnvelopeOf, HEADERS, provenanceHeaders } from "../../src/dlq/envelope.ts";
import { PORTABLE_LIMITS, unportable } from "../../src/dlq/portable-json.ts";
import { readEnvelope } from "../../src/dlq/reader.ts";
import type { Message } from "../../src/kafka/message.ts";
import clickhouseErrors from "../fixtures/clickhouse-errors.json";
import phoneVerdicts from "../fixtures/phone-verdicts.json";
import uuidCases from "../fixtures/uuid5-python.json";
import type { FuzzTarget } from "./fuzz.ts";
import { KNOWN_CALLER_NUMS, referenceDecode } from "./reference-decode.ts";
import { rowBinaryToTsv } from "./row-binary.ts";

const enc = new TextEncoder();
const utf8 = new TextDecoder();
const ctx = { phone: new PhoneNormalizer({ cacheSize: 1000 }) };
const REASONS: ReadonlySet<string> = new Set(FAILURE_REASONS);

// ---- Records ---------------------------------------------------------------------------------

/** One member of a record's top-level object, as JSON text: key (quoted) and value. */
type Member = [key: string, value: string];

const FIELDS = ["raw_id", "device_id", "caller_num", "svc", "rat", "epoch_start", "epoch_end", "up_bytes", "down_bytes", "lac", "ci", "source_ip"];

const NUMBERS = [
  "0", "-0", "1", "6", "9", "-1", "1.5", "1e3", "1E-400", "1e308", "1e309", "-1e309", "2.5e-324",
  "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
  "18446744073709551615", "18446744073709551616", "-18446744073709551615", "-18446744073709551616",
  "4294967295", "4294967296", "99999999999999999999999999999999", "18446744073709551615.0", "1.8446744073709552e19",
];

const bigDigits = fc.integer({ min: 16, max: 400 }).chain((n) =>
  fc.tuple(fc.constantFrom("", "-"), fc.integer({ min: 1, max: 9 }), fc.stringMatching(new RegExp(`^[0-9]{${n - 1}}$`))),
).map(([sign, first, rest]) => `${sign}${first}${rest}`);

const numberLiteral = fc.oneof(fc.constantFrom(...NUMBERS), bigDigits, fc.integer().map(String), fc.double().map((d) => (Number.isFinite(d) ? JSON.stringify(d) : "1e999")));

/** Strings JSON allows that decoders get wrong: lone surrogates, NUL, BOM, controls, escapes. */
const hostileString = fc
  .array(
    fc.oneof(
      fc.string({ unit: "binary", maxLength: 8 }),
      fc.constantFrom("\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0000", "\\ufeff", "\\\"", "\\\\", "\\n", "\\t", "\\/", "\u2028", "é", "日本"),
    ),
    { maxLength: 6 },
  )
  .map((parts) => `"${parts.map((p) => (p.startsWith("\\") ? p : JSON.stringify(p).slice(1, -1))).join("")}"`);

const depth = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom(1_000, 3_000, 5_000, 20_000, 100_000));

function nested(levels: number, kind: "array" | "object" | "mixed", inner: string): string {
  const open = kind === "array" ? "[" : kind === "object" ? '{"a":' : '[{"a":';
  const close = kind === "array" ? "]" : kind === "object" ? "}" : "}]";
  const n = kind === "mixed" ? Math.ceil(levels / 2) : levels;
  return open.repeat(n) + inner + close.repeat(n);
}

const scalar = fc.oneof(numberLiteral, hostileString, fc.constantFrom("null", "true", "false", "[]", "{}"));

/** A record drawn from the parity corpora: a phone Python has a verdict for, a raw_id with its UUID. */
const baseRecord: fc.Arbitrary<Member[]> = fc
  .record({
    raw: fc.oneof(fc.constantFrom(...uuidCases.cases.map((c) => c.raw_id)), fc.string({ maxLength: 40 })),
    caller: fc.constantFrom(...KNOWN_CALLER_NUMS),
    rat: fc.constantFrom(1, 6, 9, 6, 2),
    start: fc.integer({ min: 0, max: 4_294_967_295 }),
    len: fc.integer({ min: -5, max: 100_000 }),
    up: fc.oneof(fc.nat(), fc.bigInt({ min: 0n, max: 18446744073709551615n })),
    down: fc.oneof(fc.nat(), fc.bigInt({ min: 0n, max: 2n ** 60n })),
    lac: fc.oneof(fc.nat({ max: 4_294_967_295 }), fc.string({ maxLength: 6 })),
    ci: fc.oneof(fc.nat({ max: 4_294_967_295 }), fc.string({ maxLength: 6 })),
    ip: fc.option(fc.oneof(fc.ipV4(), fc.constantFrom("", "010.1.1.1", "1.2.3", "256.1.1.1")), { nil: undefined }),
  })
  .map((r) => {
    const m: Member[] = [
      ['"raw_id"', JSON.stringify(r.raw)],
      ['"device_id"', '"356938035643809"'],
      ['"caller_num"', JSON.stringify(r.caller)],
      ['"svc"', '"data"'],
      ['"rat"', String(r.rat)],
      ['"epoch_start"', String(r.start)],
      ['"epoch_end"', String(Math.min(4_294_967_295, r.start + r.len))],
      ['"up_bytes"', String(r.up)],
      ['"down_bytes"', String(r.down)],
      ['"lac"', typeof r.lac === "string" ? JSON.stringify(r.lac) : String(r.lac)],
      ['"ci"', typeof r.ci === "string" ? JSON.stringify(r.ci) : String(r.ci)],
    ];
    if (r.ip !== undefined) m.push(['"source_ip"', JSON.stringify(r.ip)]);
    return m;
  });

type Change = (m: Member[]) => void;
const at = (m: Member[], i: number) => i % Math.max(1, m.length);

const change: fc.Arbitrary<Change> = fc.oneof(
  // Nesting beside the fields, and inside one.
  fc.tuple(depth, fc.constantFrom("array", "object", "mixed" as const), scalar, fc.nat()).map(
    ([d, kind, inner, i]): Change => (m) => void m.splice(at(m, i), 0, ['"x"', nested(d, kind, inner)]),
  ),
  fc.tuple(depth, fc.constantFrom("array", "object", "mixed" as const), fc.nat()).map(
    ([d, kind, i]): Change => (m) => {
      const k = at(m, i);
      if (m[k]) m[k]![1] = nested(d, kind, m[k]![1]);
    },
  ),
  // A number at and past the limits, in a field or beside them.
  fc.tuple(numberLiteral, fc.nat(), fc.boolean()).map(([n, i, beside]): Change => (m) => {
    if (beside) m.push(['"big"', n]);
    else if (m[at(m, i)]) m[at(m, i)]![1] = n;
  }),
  // Any value in a field.
  fc.tuple(scalar, fc.nat()).map(([v, i]): Change => (m) => {
    if (m[at(m, i)]) m[at(m, i)]![1] = v;
  }),
  // A field twice, the other value before or after.
  fc.tuple(fc.constantFrom(...FIELDS), scalar, fc.boolean()).map(([f, v, before]): Change => (m) => {
    const member: Member = [`"${f}"`, v];
    if (before) m.unshift(member);
    else m.push(member);
  }),
  // A key spelled with escapes: the same key to JSON.parse.
  fc.nat().map((i): Change => (m) => {
    const k = at(m, i);
    if (!m[k]) return;
    const key = JSON.parse(m[k]![0]) as string;
    m[k]![0] = `"${[...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")}"`;
  }),
  // Keys of the prototype chain.
  fc.tuple(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf"), scalar).map(
    ([k, v]): Change => (m) => void m.push([`"${k}"`, k === "__proto__" ? `{"raw_id":${v}}` : v]),
  ),
  // A field gone.
  fc.nat().map((i): Change => (m) => void m.splice(at(m, i), 1)),
);

type ByteChange = (b: Uint8Array) => Uint8Array;
const byteChange: fc.Arbitrary<ByteChange> = fc.oneof(
  fc.constant((b: Uint8Array) => concat(new Uint8Array([0xef, 0xbb, 0xbf]), b)),
  fc.tuple(fc.nat(), fc.constantFrom([0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0x80], [0x00], [0xe2, 0x82])).map(
    ([i, bad]) => (b: Uint8Array) => {
      const k = i % (b.length + 1);
      return concat(b.subarray(0, k), new Uint8Array(bad), b.subarray(k));
    },
  ),
  fc.tuple(fc.nat(), fc.nat({ max: 255 })).map(([i, v]) => (b: Uint8Array) => {
    const c = b.slice();
    if (c.length) c[i % c.length] = v;
    return c;
  }),
  fc.nat().map((i) => (b: Uint8Array) => b.subarray(0, i % (b.length + 1))),
);

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) out.set(p, (o += p.length) - p.length);
  return out;
}

const render = (m: Member[], ws: string) => `{${m.map(([k, v]) => `${k}${ws}:${ws}${v}`).join(`,${ws}`)}}`;

/** A corpus record after up to five structural and two byte-level hostile changes. */
export const hostileRecord: fc.Arbitrary<Uint8Array> = fc
  .tuple(baseRecord, fc.array(change, { maxLength: 5 }), fc.array(byteChange, { maxLength: 2 }), fc.constantFrom("", " ", "\n\t"))
  .map(([members, changes, byteChanges, ws]) => {
    const m = members.map((x) => [...x] as Member);
    for (const c of changes) c(m);
    return byteChanges.reduce<Uint8Array>((b, c) => c(b), enc.encode(render(m, ws)));
  });

/**
 * Records at the edge of what the single pass takes (record-scan.ts): ASCII texts with the odd quote,
 * backslash or space, integers up to and past 15 digits, valid callers, then up to two hostile changes
 * from the list above. Corpus records are mostly declined there, for their non-ASCII texts and huge
 * counters; these are mostly scanned, so the fuzzer compares the two paths where they both answer.
 */
const asciiUnit = fc.oneof({ arbitrary: fc.constantFrom(..."abcXYZ019-_:. /"), weight: 30 }, fc.constantFrom('"', "\\", "é"));
const asciiText = fc.string({ unit: asciiUnit, minLength: 1, maxLength: 12 });
const scanInteger = fc.oneof(fc.nat({ max: 999 }), fc.nat(), fc.integer({ min: 0, max: 999_999_999_999_999 }), fc.constantFrom(1e15, 4294967295, 4294967296));
const cellInteger = fc.oneof({ arbitrary: fc.nat({ max: 4_294_967_295 }), weight: 8 }, fc.constant(4_294_967_296));
const validCallers = phoneVerdicts.cases.filter((c) => c.msisdn !== null && /^[\x20-\x7e]*$/.test(c.caller_num)).map((c) => c.caller_num);
export const scannableRecord: fc.Arbitrary<Uint8Array> = fc
  .tuple(
    fc.record({
      raw: asciiText, device: asciiText, caller: fc.constantFrom(...validCallers), svc: fc.constantFrom("data", "voice", " sms", "x y"),
      rat: fc.constantFrom(1, 6, 9), start: fc.integer({ min: 0, max: 4_294_967_295 }), len: fc.integer({ min: -2, max: 100_000 }),
      up: scanInteger, down: scanInteger, lac: fc.oneof(cellInteger, asciiText), ci: fc.oneof(cellInteger, asciiText),
      ip: fc.option(fc.oneof({ arbitrary: fc.ipV4(), weight: 8 }, fc.constantFrom("", "1.2.3")), { nil: null }),
    }),
    fc.oneof({ arbitrary: fc.constant([]), weight: 2 }, fc.array(change, { minLength: 1, maxLength: 2 })),
    fc.constantFrom("", " ", "\n"),
  )
  .map(([r, changes, ws]) => {
    const m: Member[] = [
      ['"raw_id"', JSON.stringify(r.raw)], ['"device_id"', JSON.stringify(r.device)], ['"caller_num"', JSON.stringify(r.caller)],
      ['"svc"', JSON.stringify(r.svc)], ['"rat"', String(r.rat)], ['"epoch_start"', String(r.start)],
      ['"epoch_end"', String(Math.min(4_294_967_295, r.start + r.len))], ['"up_bytes"', String(r.up)], ['"down_bytes"', String(r.down)],
      ['"lac"', JSON.stringify(r.lac)], ['"ci"', JSON.stringify(r.ci)], ['"source_ip"', JSON.stringify(r.ip)],
    ];
    for (const c of changes) c(m);
    return enc.encode(render(m, ws));
  });

/** Any JSON text, and any bytes: what a producer that is not a vendor sends. */
export const anyJsonOrBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.json({ depthSize: "large" }).map((t) => enc.encode(t)),
  fc.uint8Array({ maxLength: 512 }),
  fc.string({ unit: "binary", maxLength: 256 }).map((s) => enc.encode(s)),
);

/** A valid corpus record, in member order and spelling changed only as JSON allows. */
export const corpusRecord: fc.Arbitrary<Uint8Array> = fc
  .tuple(baseRecord, fc.array(fc.nat(), { maxLength: 3 }), fc.constantFrom("", " ", "\r\n"))
  .map(([m, swaps, ws]) => {
    for (const s of swaps) {
      const a = s % m.length;
      const b = (s >> 4) % m.length;
      [m[a], m[b]] = [m[b]!, m[a]!];
    }
    return enc.encode(render(m, ws));
  });

/** Most a decode may take: 20 ms plus 2 µs a byte (decode costs about 2 µs a record, JSON.parse ~3 ns a byte). */
const boundMs = (bytes: number) => 20 + bytes * 0.002;

function checkTotal(bytes: Uint8Array): Decoded {
  const d = decode(bytes, ctx);
  const took = bestOf(3, () => decode(bytes, ctx), boundMs(bytes.length));
  if (took > boundMs(bytes.length))
    throw new Error(`decode took ${took.toFixed(1)} ms for ${bytes.length} bytes (bound ${boundMs(bytes.length).toFixed(1)} ms)`);
  if (d.ok) {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(d.row.cdr_id))
      throw new Error(`cdr_id ${d.row.cdr_id} is not a UUIDv5`);
  } else {
    if (!REASONS.has(d.rejection.reason)) throw new Error(`reason outside the taxonomy: ${d.rejection.reason}`);
    if (typeof d.rejection.payload !== "string") throw new Error("rejection without a payload text");
  }
  return d;
}

/** decode's verdict equals the reference rules' wherever the reference has one. */
function checkAgainstReference(bytes: Uint8Array, d: Decoded): void {
  const ref = referenceDecode(bytes);
  if ("unknown" in ref) return;
  if (ref.ok !== d.ok) throw new Error(`decode ${verdict(d)}, reference ${JSON.stringify(ref)}`);
  if (!ref.ok && !d.ok) {
    if (ref.reason !== d.rejection.reason || ref.field !== d.rejection.field)
      throw new Error(`decode ${verdict(d)}, reference ${ref.reason}/${ref.field}`);
    return;
  }
  if (ref.ok && d.ok) {
    const r = d.row;
    const got: Record<string, string> = {
      cdr_id: r.cdr_id, raw_id: r.raw_id, device_id: r.device_id, msisdn: r.msisdn, service_type: r.service_type,
      radio_access_type: r.radio_access_type, cell_id: `${r.lac}_${r.ci}`, session_start_time: String(r.session_start_time),
      session_end_time: String(r.session_end_time), duration_seconds: String(r.duration_seconds), up_bytes: String(r.up_bytes),
      down_bytes: String(r.down_bytes), total_bytes: String(r.total_bytes), source_ip: String(r.source_ip),
    };
    for (const [k, v] of Object.entries(ref.row))
      if (got[k] !== v) throw new Error(`${k}: decode ${JSON.stringify(got[k])}, reference ${JSON.stringify(v)}`);
  }
}

const verdict = (d: Decoded) => (d.ok ? "row" : `${d.rejection.reason}/${d.rejection.field}`);

/**
 * The worker's single pass agrees with decode(): what it accepts decode() accepts, written to the
 * same RowBinary bytes; what it declines is decode()'s alone.
 */
function checkScan(bytes: Uint8Array, d: Decoded): void {
  const fast = scanRecord(bytes, ctx.phone);
  if (fast === null) return;
  if (!d.ok) throw new Error(`the scan accepted a record decode() rejects: ${verdict(d)}`);
  const a = new RowBinaryBuffer(16);
  const b = new RowBinaryBuffer(16);
  a.addScanned(fast, 1_700_000_000, 1, 2);
  b.add(d.row, 1_700_000_000, 1, 2);
  if (Buffer.compare(a.bytes(), b.bytes()) !== 0) throw new Error("the scan's row differs from decode()'s");
  if (fast.payload() !== d.payload) throw new Error("the scan's payload text differs from decode()'s");
}

function decodeCheck(bytes: Uint8Array): void {
  const d = checkTotal(bytes);
  checkAgainstReference(bytes, d);
  checkScan(bytes, d);
}

// ---- DLQ envelopes ---------------------------------------------------------------------------

const dlqMessage = (value: Uint8Array, headers: Array<[string, Uint8Array]>): Message => ({
  topic: "cdr.raw.dlq", partition: 0, offset: 3, timestamp: -1, value, key: null, headers,
});

/** Envelopes as the worker writes them, then mutated; and anything else a DLQ writer may send. */
const envelopeBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(hostileRecord, fc.constantFrom(...FAILURE_REASONS), fc.option(fc.string(), { nil: null }), fc.array(byteChange, { maxLength: 2 }), fc.boolean())
    .map(([payload, reason, field, changes, reordered]) => {
      const text = utf8.decode(payload);
      let isObject = false;
      try {
        const v = JSON.parse(text);
        isObject = v !== null && typeof v === "object" && !Array.isArray(v);
      } catch {}
      const env = encodeEnvelope({ reason, field, payload: text, payloadIsObject: isObject }, new Date(0), "w");
      // The same envelope with its payload last, as another writer (or a tool) may lay it out.
      const body = reordered
        ? `{"failure_reason":${JSON.stringify(reason)},"failed_field":${JSON.stringify(field)},"failed_at":"x","worker_instance":"w",` +
          `"original_payload":${isObject ? text : JSON.stringify(text)}}`
        : env;
      return changes.reduce<Uint8Array>((b, c) => c(b), enc.encode(body));
    }),
  fc.constantFrom("{}", "null", "[]", '"x"', '{"original_payload":1}', '{"original_payload":{},"failure_reason":"__proto__"}').map((t) => enc.encode(t)),
  fc.dictionary(fc.constantFrom("original_payload", "failure_reason", "failed_field", "failed_at", "worker_instance", "__proto__"), fc.jsonValue())
    .map((o) => enc.encode(JSON.stringify(o))),
  anyJsonOrBytes,
);

function checkEnvelope(bytes: Uint8Array): void {
  const headers = provenanceHeaders({ topic: "cdr.raw", partition: 1, offset: 2, stage: "decode", detail: "d" }).map(
    ([k, v]) => [k, enc.encode(v)] as [string, Uint8Array],
  );
  headers.push(["__proto__", enc.encode("x")]);
  const e = readEnvelope(dlqMessage(bytes, headers));
  if (typeof e === "string") return;
  if (typeof e.payloadText !== "string") throw new Error("an accepted envelope without a payload text");
  if (e.headers[HEADERS.sourceOffset] !== "2") throw new Error("headers lost");
  const original = e.envelope.original_payload;
  // What a replay sends must be the payload the envelope holds (compared without recursion: a
  // payload may nest deeper than JSON.stringify goes).
  if (typeof original === "string") {
    if (e.payloadText !== original) throw new Error("payloadText differs from the string original_payload");
    return;
  }
  const back: unknown = JSON.parse(e.payloadText);
  if (back === null || typeof back !== "object" || Array.isArray(back)) throw new Error("payloadText of an object payload is no object");
  const keys = (o: object) => Object.keys(o).join("\u0000");
  if (keys(back) !== keys(original)) throw new Error("payloadText has other members than original_payload");
}

// ---- Portable JSON -------------------------------------------------------------------------

/** Levels of a parsed value, counted with a stack of its own (the values nest deeper than recursion goes). */
function levels(v: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[v, 1]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== "object") continue;
    max = Math.max(max, d);
    for (const c of Object.values(x)) stack.push([c, d + 1]);
  }
  return max;
}

/**
 * Any text: unportable never throws. A JSON text it passes nests within the limit (counted on the
 * parsed value, another way), and its envelope carries the payload as an object; one it names
 * travels as the very text.
 */
function checkPortable(bytes: Uint8Array): void {
  const text = utf8.decode(bytes);
  const verdict = unportable(text);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return;
  if (verdict === null && levels(parsed) > PORTABLE_LIMITS.depth) throw new Error(`passed a text ${levels(parsed)} levels deep`);
  const e = encodeEnvelopeOf({ reason: "missing_required_field", field: null, payload: text, payloadIsObject: true }, new Date(0), "w");
  const payload: unknown = JSON.parse(e.text).original_payload;
  // A payload past MAX_PAYLOAD_CHARS travels truncated, a string, whatever its verdict.
  if (e.truncated) {
    if (typeof payload !== "string" || e.asText !== null) throw new Error("a truncated payload travels in the wrong form");
    return;
  }
  if (e.asText !== verdict) throw new Error("the envelope's reason differs from the verdict");
  if (verdict !== null ? payload !== text : typeof payload !== "object") throw new Error("the payload travels in the wrong form");
}

// ---- Commit metadata -------------------------------------------------------------------------

const metadataBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 2 ** 42 }), fc.boolean()).map(([t, txn]) => enc.encode(commitMetadata(t, txn))),
  fc.record({ cdr_worker: fc.jsonValue(), since: fc.oneof(fc.jsonValue(), fc.double()) }, { requiredKeys: [] }).map((o) => enc.encode(JSON.stringify(o))),
  fc.tuple(fc.integer({ min: 0, max: 2 ** 42 }), fc.array(byteChange, { minLength: 1, maxLength: 2 })).map(([t, cs]) =>
    cs.reduce<Uint8Array>((b, c) => c(b), enc.encode(commitMetadata(t))),
  ),
  anyJsonOrBytes,
);

function checkMetadata(bytes: Uint8Array): void {
  const text = utf8.decode(bytes);
  const m = readCommitMetadata(text);
  if (m !== null && !(typeof m.since === "number" && Number.isFinite(m.since))) throw new Error(`since ${m.since} is not a finite number`);
  // As the worker writes it: a JSON integer, so no leading zero (000 is not JSON, and reads as nothing).
  const asWritten = /^\{"cdr_worker":1,"since":(0|[1-9]\d*)(,"txn":1)?\}$/.exec(text);
  if (asWritten && (m?.since !== Number(asWritten[1]) || m.transactional !== (asWritten[2] !== undefined)))
    throw new Error("metadata as the worker writes it did not read back");
}

// ---- RowBinary -------------------------------------------------------------------------------

/** Bodies the encoder wrote from decoded rows, then cut or changed; and any bytes. */
const rowBinaryBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(fc.array(corpusRecord, { minLength: 1, maxLength: 4 }), fc.array(byteChange, { maxLength: 2 })).map(([records, changes]) => {
    const buf = new RowBinaryBuffer(16);
    for (const r of records) {
      const d = decode(r, ctx);
      if (d.ok) buf.add(d.row, 1_700_000_000, 1, 2);
    }
    return changes.reduce<Uint8Array>((b, c) => c(b), buf.bytes().slice());
  }),
  fc.uint8Array({ maxLength: 600 }),
);

function checkRowBinary(bytes: Uint8Array): void {
  try {
    rowBinaryToTsv(bytes);
  } catch (e) {
    if ((e as Error).name !== "RowBinaryError") throw e;
  }
}

/** The encoder's body reads back as formatRow's lines: the reader is exact where the bytes are whole. */
function checkRowBinaryRoundTrip(bytes: Uint8Array): void {
  const d = decode(bytes, ctx);
  if (!d.ok) return;
  const buf = new RowBinaryBuffer(16);
  buf.add(d.row, 1_700_000_000, 1, 2);
  const got = rowBinaryToTsv(buf.bytes());
  const want = formatRow(d.row, 1_700_000_000, 1, 2);
  if (got.length !== 1 || got[0] !== want) throw new Error(`read back ${JSON.stringify(got)}, wrote ${JSON.stringify(want)}`);
}

// ---- ClickHouse's error answers ----------------------------------------------------------------

/** Answers both servers really gave (captured), cut, changed and repeated; and any text. */
const errorAnswerBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(fc.constantFrom(...clickhouseErrors.map((e) => e.body)), fc.array(byteChange, { maxLength: 3 }), fc.integer({ min: 1, max: 50 }))
    .map(([body, changes, times]) => changes.reduce<Uint8Array>((b, c) => c(b), enc.encode(body.repeat(times)))),
  fc.tuple(fc.constantFrom("Column values: x = ", "Column 1,   name: ", "(at row ", "Code: ", " (TYPE) (version ", "(", "Exception: ("), fc.constantFrom(" ", ".", "'", "\\", "9", ",", "A", "A_", "AB9"), fc.integer({ min: 1, max: 20_000 }))
    .map(([head, filler, n]) => enc.encode(head + filler.repeat(n) + "x")),
  fc.string({ unit: "binary", maxLength: 2000 }).map((s) => enc.encode(s)),
);

const KINDS = new Set(["transient", "condition", "data", "shape", "configuration"]);

function checkErrorAnswer(bytes: Uint8Array): void {
  const body = utf8.decode(bytes);
  const e = classifyInsertError(refusal(500, {}, body), "insert");
  if (!KINDS.has(e.kind)) throw new Error(`kind ${e.kind}`);
  const took = bestOf(3, () => classifyInsertError(refusal(500, {}, body), "insert"), boundMs(bytes.length));
  if (took > boundMs(bytes.length)) throw new Error(`classifying took ${took.toFixed(1)} ms for ${bytes.length} bytes`);
}

/**
 * The shortest of up to `n` timed calls, stopping once one is within `bound`: a collection, or
 * another process on the machine, can land in one call; only a call that is slow every time is.
 */
function bestOf(n: number, fn: () => unknown, bound: number): number {
  let best = Infinity;
  for (let i = 0; i < n && best > bound; i++) {
    const t0 = performance.now();
    fn();
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

/** A DLQ record of any bytes and hostile headers becomes exactly one row of the DLQ table's shape, never an exception. */
function checkDlqRow(bytes: Uint8Array): void {
  const headers = provenanceHeaders({ topic: "cdr.raw", partition: 1, offset: 2, stage: "decode", detail: "d", attempts: 3 }).map(
    ([k, v]) => [k, enc.encode(v)] as [string, Uint8Array],
  );
  headers.push(["__proto__", enc.encode("x")], [HEADERS.attempts, enc.encode("-1e999")]);
  const m = dlqMessage(bytes, headers);
  const row = dlqRow(m, { storedAt: 1_700_000_000 });
  const envelope = readEnvelope(m);
  if (row.dlq_offset !== m.offset || row.dlq_partition !== m.partition) throw new Error("the row lost its DLQ position");
  // An envelope's `unreadable` names only the fields the row mended (row.ts fitRow); a record that is
  // no envelope's says why first.
  const mendedOnly = /^(?:\w+: (?:a lone surrogate replaced by U\+FFFD|out of [^;]+))(?:; \w+: (?:a lone surrogate replaced by U\+FFFD|out of [^;]+))*$/;
  if (typeof envelope === "string" ? row.unreadable === "" : row.unreadable !== "" && !mendedOnly.test(row.unreadable))
    throw new Error(`unreadable does not say whether it is an envelope: ${row.unreadable.slice(0, 200)}`);
  for (const [k, v] of Object.entries(row))
    if (typeof v === "string" && !v.isWellFormed()) throw new Error(`${k} is not well-formed: the server refuses the row`);
  if (!Number.isSafeInteger(row.source_offset) || Math.abs(row.source_partition) > 2 ** 31) throw new Error("a source out of its column");
  if (!/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(row.failed_at)) throw new Error(`failed_at ${row.failed_at} is not a DateTime`);
  if (row.attempts !== null && !(Number.isInteger(row.attempts) && row.attempts >= 0 && row.attempts < 2 ** 32)) throw new Error("attempts out of UInt32");
  for (const f of [row.raw_id, row.device_id, row.caller_prefix])
    if (f !== null && (typeof f !== "string" || f.length > 256)) throw new Error("a lenient field is not a short string");
  if (typeof envelope !== "string" && row.original_payload !== envelope.payloadText.toWellFormed()) throw new Error("the payload is not the envelope's");
  // The insert's body: the writer by name writes the bytes of the one by the SQL file's types.
  const [fast, reference] = [new DlqRowBinary(), new DlqRowBinary()];
  fast.add(row);
  reference.addByColumns(row);
  if (Buffer.compare(fast.bytes(), reference.bytes()) !== 0) throw new Error("the row's RowBinary differs from the reference's");
}

/** Any text is refused with a --where line, or parses to SQL that parses back to itself. */
function checkPredicate(bytes: Uint8Array): void {
  const text = utf8.decode(bytes);
  let sql: string;
  try {
    sql = predicateSql(parsePredicate(text));
  } catch (e) {
    if (!(e instanceof PredicateError)) throw e;
    return;
  }
  if (predicateSql(parsePredicate(sql)) !== sql) throw new Error("the SQL written is not the grammar's own");
}

const PREDICATE_PARTS = ["failure_reason", "dlq_offset", "device_id", "=", "<>", ">=", " IN ", " NOT ", " AND ", " OR ", " IS NULL", "(", ")", ",", "'a'", "'it''s'", "'\\'", "-5", "1.5", ";", "--", "sleep(1)", " ", "\u0000", "NULL"];
const predicateBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.array(fc.constantFrom(...PREDICATE_PARTS), { maxLength: 24 }).map((parts) => enc.encode(parts.join(""))),
  fc.uint8Array({ maxLength: 200 }),
);

// ---- The URL mask ----------------------------------------------------------------------------

/** A password of any characters in a CLICKHOUSE_URL list, said in a message as a config error or log line does. */
const urlWithPassword: fc.Arbitrary<Uint8Array> = fc
  .tuple(fc.string({ unit: "binary", minLength: 1, maxLength: 40 }), fc.string({ maxLength: 12 }), fc.nat(3), fc.boolean())
  .filter(([pw]) => !/[\s,;"'(=[<][a-z][a-z0-9+.-]*:\/\//i.test(`,${pw}`) && pw.length >= 4)
  .map(([raw, user, others, quoted]) => {
    // A mark of its own first: the password is then nowhere else in the text by chance.
    const pw = `Zq${raw}`;
    const urls = [`http://${user}:${pw}@ch-a:8123`, ...Array.from({ length: others }, (_, i) => `https://u${i}:${pw}@ch-${i}:8443/`)];
    const value = urls.join(",");
    return enc.encode(quoted ? `CLICKHOUSE_URL="${value}": expected a URL` : `cannot reach ${value} (${pw.length})`);
  });

/** Whatever the password holds, none of it is shown: the text around each URL is, its host too. */
function checkUrlMask(bytes: Uint8Array): void {
  const text = utf8.decode(bytes);
  const at = text.indexOf(":Zq");
  const end = text.indexOf("@ch-a:8123");
  if (at < 0 || end < at) return;
  const secret = text.slice(at + 1, end);
  const shown = withoutUserInfo(text);
  if (shown.includes(secret)) throw new Error(`the password shows: ${JSON.stringify(shown).slice(0, 300)}`);
  if (!shown.includes("[redacted]@ch-a:8123")) throw new Error(`the first host is not shown masked: ${JSON.stringify(shown).slice(0, 300)}`);
}

// ---- The targets -----------------------------------------------------------------------------

export const FUZZ_TARGETS: readonly FuzzTarget[] = [
  { name: "decode-hostile", inputs: "corpus records with hostile properties combined", arbitrary: hostileRecord, check: decodeCheck },
  { name: "decode-corpus", inputs: "valid corpus records, reordered and re-spaced", arbitrary: corpusRecord, check: decodeCheck },
  { name: "decode-scannable", inputs: "records at the edge of the single pass, both paths compared", arbitrary: scannableRecord, check: decodeCheck },
  { name: "decode-any", inputs: "any JSON text and any bytes", arbitrary: anyJsonOrBytes, check: decodeCheck },
  { name: "dlq-envelope", inputs: "envelopes as written then mutated, and anything else", arbitrary: envelopeBytes, check: checkEnvelope },
  { name: "portable-json", inputs: "corpus records with hostile properties, any JSON text and any bytes", arbitrary: fc.oneof(hostileRecord, anyJsonOrBytes), check: checkPortable },
  { name: "commit-metadata", inputs: "metadata as written, mutated, and any JSON", arbitrary: metadataBytes, check: checkMetadata },
  { name: "row-binary", inputs: "encoder bodies cut and changed, and any bytes", arbitrary: rowBinaryBytes, check: checkRowBinary },
  { name: "clickhouse-error", inputs: "both servers' captured error answers, mutated, and any text", arbitrary: errorAnswerBytes, check: checkErrorAnswer },
  { name: "dlq-table-row", inputs: "envelopes as written then mutated, and anything else, with hostile headers", arbitrary: envelopeBytes, check: checkDlqRow },
  { name: "dlq-predicate", inputs: "the --where grammar's pieces in any order, and any bytes", arbitrary: predicateBytes, check: checkPredicate },
  { name: "row-binary-roundtrip", inputs: "valid corpus records", arbitrary: corpusRecord, check: checkRowBinaryRoundTrip },
  { name: "url-mask", inputs: "CLICKHOUSE_URL lists whose passwords hold any character, in messages", arbitrary: urlWithPassword, check: checkUrlMask },
];
