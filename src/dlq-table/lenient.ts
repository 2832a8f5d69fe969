/**
 * What the DLQ table reads out of a payload that failed: raw_id, device_id and the caller's country
 * prefix, leniently. The records here are the ones the worker refused, so nothing about them is
 * trusted: an object's field of any type, or a malformed text's `"name": value` pair found by
 * pattern. Null where a field is absent or unreadable; never throws.
 */
import { getCountryCallingCode, Metadata, parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";
import { withInternationalPrefix } from "../cdr/phone.ts";

export interface LenientFields {
  raw_id: string | null;
  device_id: string | null;
  /** "+44": the calling code of caller_num, where one can be read from it. */
  caller_prefix: string | null;
}

/** Longest text kept of a field read leniently: an id, not a payload. */
const MAX_FIELD_CHARS = 256;

export function lenientFields(
  payload: Record<string, unknown> | string,
  defaultRegion?: CountryCode,
): LenientFields {
  const read = (name: string) => (typeof payload === "string" ? fromText(payload, name) : fromObject(payload, name));
  const caller = read("caller_num");
  return { raw_id: read("raw_id"), device_id: read("device_id"), caller_prefix: callerPrefix(caller, defaultRegion) };
}

function fromObject(o: Record<string, unknown>, name: string): string | null {
  if (!Object.hasOwn(o, name)) return null;
  const v = o[name];
  if (typeof v === "string") return cap(v);
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return null;
}

/** Each field's pattern, made once: a RegExp per row and field cost more than its match. */
const PAIRS = new Map<string, RegExp>();

/** A string or a number after `"name":`, the first such pair in the text. */
function fromText(text: string, name: string): string | null {
  let pair = PAIRS.get(name);
  if (!pair) {
    pair = new RegExp(`"${name}"\\s*:\\s*("(?:[^"\\\\]|\\\\.){0,${MAX_FIELD_CHARS * 6}}"|-?\\d{1,40})`);
    PAIRS.set(name, pair);
  }
  const at = pair.exec(text);
  if (!at) return null;
  const literal = at[1]!;
  if (!literal.startsWith('"')) return literal;
  // Without an escape a string's text is its value; JSON.parse of it cost the filler 0.4 µs an envelope.
  if (!literal.includes("\\")) return cap(literal.slice(1, -1));
  try {
    return cap(JSON.parse(literal) as string);
  } catch {
    return cap(literal.slice(1, -1));
  }
}

function cap(s: string): string | null {
  return s.length === 0 ? null : s.slice(0, MAX_FIELD_CHARS);
}

/** The calling code of a caller number, international or of the default region; null when none reads. */
export function callerPrefix(caller: string | null, defaultRegion?: CountryCode): string | null {
  if (caller === null || caller.length > 64) return null;
  try {
    const s = withInternationalPrefix(caller.trim());
    const fast = s.startsWith("+") ? plainCallingCode(s) : defaultRegion ? nationalCallingCode(s, defaultRegion) : null;
    if (fast !== null) return fast;
    const n = s.startsWith("+") ? parsePhoneNumberFromString(s) : parsePhoneNumberFromString(s, defaultRegion);
    return n?.countryCallingCode ? `+${n.countryCallingCode}` : null;
  } catch {
    return null;
  }
}

const PLAIN = /^\+[1-9]\d{3,16}$/;
const metadata = new Metadata();
// hasCallingCode() (non-geographic codes included) exists at run time but not in the package's types.
const knownCode = metadata as unknown as { hasCallingCode(code: string): boolean };
/** libphonenumber-js's least national number (its MIN_LENGTH_FOR_NSN); PLAIN bounds the most. */
const MIN_NSN_DIGITS = 2;

/**
 * The calling code of a plain "+digits" number as libphonenumber-js's parse gives it, without the
 * parse: calling codes are prefix-free (ITU-T E.164), so the one known code among its first 1–3
 * digits is it. The parse cost 8.5 µs a row, most of the filler's time a row; this takes well under
 * one. Null where it cannot decide (no known code, a national number out of the parse's bounds):
 * the caller then parses, so the shortcut never changes an answer (test/dlq-table/lenient.test.ts
 * holds the two together).
 */
function plainCallingCode(s: string): string | null {
  if (!PLAIN.test(s)) return null;
  for (let digits = 1; digits <= 3; digits++) {
    const code = s.slice(1, 1 + digits);
    if (!knownCode.hasCallingCode(code)) continue;
    const nsn = s.length - 1 - digits;
    return nsn >= MIN_NSN_DIGITS ? `+${code}` : null;
  }
  return null;
}

const NATIONAL = /^\d{4,17}$/;
const iddPrefixes = new Map<CountryCode, RegExp>();

/**
 * The calling code of a plain national number read in the default region: the region's own, unless
 * the number starts with the region's international dialling prefix (then the parse reads another
 * country's code after it, and decides). Null where it cannot decide.
 */
function nationalCallingCode(s: string, region: CountryCode): string | null {
  if (!NATIONAL.test(s)) return null;
  let idd = iddPrefixes.get(region);
  if (idd === undefined) {
    metadata.selectNumberingPlan(region);
    // IDDPrefix() exists at run time but is missing from the package's NumberingPlan type.
    const plan = metadata.numberingPlan as unknown as { IDDPrefix(): string } | undefined;
    iddPrefixes.set(region, (idd = new RegExp(`^(?:${plan?.IDDPrefix() ?? "$^"})`)));
  }
  return idd.test(s) ? null : `+${getCountryCallingCode(region)}`;
}
