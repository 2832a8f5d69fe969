/**
 * Bytes → JSON object, never throwing, with integers exact up to 2^64−1.
 *
 * JSON.parse turns 18446744073709551615 into a double. The fast path parses plainly; only when a
 * top-level number is an integer beyond 2^53 does the record go through a second pass that reads
 * those members' source digits into BigInts (so large counters cost extra, normal ones nothing).
 * That pass is a loop over the text JSON.parse already accepted, not a reviver: a reviver walks
 * every nested value recursively, and a record with a big integer beside 5,000 levels of nesting
 * overflowed the stack (test/cdr/json.test.ts). Only top-level members are fields, so nested
 * values are skipped without being looked at.
 */
import { scanFlatObject, skipWs } from "./flat-json.ts";
import { BACKSLASH, COMMA, QUOTE } from "./json-bytes.ts";

const strict = new TextDecoder("utf-8", { fatal: true });
const lossy = new TextDecoder("utf-8");

export type ParsedJson =
  { ok: true; text: string; record: Record<string, unknown> } | { ok: false; text: string; detail: string };

/** Decodes a Kafka message value; null (tombstone) and empty payloads are malformed. */
export function parseRecord(value: Uint8Array | string | null): ParsedJson {
  if (value === null) return { ok: false, text: "", detail: "payload is null (tombstone)" };
  let text: string;
  if (typeof value === "string") text = value;
  else {
    try {
      text = strict.decode(value);
    } catch {
      return { ok: false, text: lossy.decode(value), detail: "payload is not valid UTF-8" };
    }
  }
  if (text.length === 0) return { ok: false, text, detail: "payload is empty" };
  // The common shape first; anything it does not handle takes JSON.parse below, unchanged.
  const flat = scanFlatObject(text);
  if (flat !== undefined) return { ok: true, text, record: flat };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { ok: false, text, detail: `not JSON: ${(e as Error).message}` };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    return {
      ok: false,
      text,
      detail: `JSON is ${parsed === null ? "null" : Array.isArray(parsed) ? "an array" : typeof parsed}, not an object`,
    };
  }
  const record = parsed as Record<string, unknown>;
  return { ok: true, text, record: needsExactReparse(record) ? exactParse(text, record) : record };
}

function needsExactReparse(record: Record<string, unknown>): boolean {
  for (const k in record) {
    const v = record[k];
    if (typeof v === "number" && !Number.isSafeInteger(v) && Number.isInteger(v)) return true;
  }
  return false;
}

/**
 * The record with each top-level member whose value is an integer literal beyond 2^53 replaced by
 * the BigInt of its digits. `text` is JSON that JSON.parse accepted as an object, so the scan needs
 * no error handling; nesting is skipped by counting brackets, outside strings, in one loop.
 * Duplicate keys: JSON.parse keeps the last occurrence, and so does this.
 */
function exactParse(text: string, record: Record<string, unknown>): Record<string, unknown> {
  const exact = new Map<string, string | undefined>();
  const n = text.length;
  let i = skipWs(text, 0, n) + 1; // past "{"
  for (;;) {
    i = skipWs(text, i, n);
    if (text.charCodeAt(i) !== QUOTE) break; // "}": an empty object
    const keyEnd = stringEnd(text, i + 1, n);
    // Escapes in keys ("\u0062ig") mean what JSON.parse says they mean.
    const key = JSON.parse(text.slice(i, keyEnd + 1)) as string;
    i = skipWs(text, skipWs(text, keyEnd + 1, n) + 1, n); // past ":"
    const valueStart = i;
    i = valueEnd(text, i, n);
    const literal = text.slice(valueStart, i);
    exact.set(key, DIGITS.test(literal) ? literal : undefined);
    i = skipWs(text, i, n);
    if (text.charCodeAt(i) !== COMMA) break;
    i++;
  }
  for (const [key, literal] of exact) {
    const v = record[key];
    if (literal === undefined || typeof v !== "number" || Number.isSafeInteger(v)) continue;
    // defineProperty: a member named __proto__ is an own property, and an assignment would not be.
    const value = BigInt(literal);
    Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
  }
  return record;
}

const DIGITS = /^-?\d+$/;

/** Index of the quote closing a string whose content starts at `from` (escapes skipped). */
function stringEnd(text: string, from: number, n: number): number {
  for (let j = from; j < n; j++) {
    const c = text.charCodeAt(j);
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j;
  }
  return n;
}

/** Index just past the value starting at `i`: a string, a nested value, or a literal. */
function valueEnd(text: string, i: number, n: number): number {
  let depth = 0;
  for (let j = i; j < n; j++) {
    const c = text.charCodeAt(j);
    if (c === QUOTE) {
      j = stringEnd(text, j + 1, n);
      if (depth === 0) return j + 1;
    } else if (c === 0x5b || c === 0x7b) depth++;
    else if (c === 0x5d || c === 0x7d) {
      if (depth === 0) return j; // the enclosing object's "}"
      if (--depth === 0) return j + 1;
    } else if (depth === 0 && (c === COMMA || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) return j;
  }
  return n;
}
