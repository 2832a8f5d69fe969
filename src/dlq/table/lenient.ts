/**
 * What the DLQ table reads out of a payload that failed: raw_id, device_id and the caller's country
 * prefix, leniently. The records here are the ones the worker refused, so nothing about them is
 * trusted: an object's field of any type, or a malformed text's `"name": value` pair found by
 * pattern. Null where a field is absent or unreadable; never throws.
 */
import { parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";
import { withInternationalPrefix } from "../../cdr/phone.ts";

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

/** A string or a number after `"name":`, the first such pair in the text. */
function fromText(text: string, name: string): string | null {
  const at = new RegExp(`"${name}"\\s*:\\s*("(?:[^"\\\\]|\\\\.){0,${MAX_FIELD_CHARS * 6}}"|-?\\d{1,40})`).exec(text);
  if (!at) return null;
  const literal = at[1]!;
  if (!literal.startsWith('"')) return literal;
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
    const n = s.startsWith("+") ? parsePhoneNumberFromString(s) : parsePhoneNumberFromString(s, defaultRegion);
    return n?.countryCallingCode ? `+${n.countryCallingCode}` : null;
  } catch {
    return null;
  }
}
