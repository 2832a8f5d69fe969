/**
 * Bytes → JSON object, never throwing, with integers exact up to 2^64−1.
 *
 * JSON.parse turns 18446744073709551615 into a double. The fast path parses plainly; only when a
 * top-level number is an integer beyond 2^53 does the record go through a second parse whose
 * reviver reads the literal's source digits into a BigInt (so large counters cost extra, normal
 * ones nothing).
 */
import { scanFlatObject } from "./flat-json.ts";

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
  return { ok: true, text, record: needsExactReparse(record) ? exactParse(text) : record };
}

function needsExactReparse(record: Record<string, unknown>): boolean {
  for (const k in record) {
    const v = record[k];
    if (typeof v === "number" && !Number.isSafeInteger(v) && Number.isInteger(v)) return true;
  }
  return false;
}

const DIGITS = /^-?\d+$/;

function exactParse(text: string): Record<string, unknown> {
  return JSON.parse(text, function exactIntegers(this: unknown, _key: string, v: unknown, ctx?: { source?: string }) {
    if (typeof v === "number" && !Number.isSafeInteger(v) && ctx?.source !== undefined && DIGITS.test(ctx.source))
      return BigInt(ctx.source);
    return v;
  } as (this: unknown, key: string, value: unknown) => unknown);
}
