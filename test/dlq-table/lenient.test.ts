// What the DLQ table reads out of a refused payload: raw_id, device_id and the caller's prefix,
// from an object of any field types or from malformed text, null where nothing readable is there.
import { expect, setDefaultTimeout, test } from "bun:test";
import { getCountries, getCountryCallingCode, Metadata, parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";
import { withInternationalPrefix } from "../../src/cdr/phone.ts";
import { callerPrefix, lenientFields } from "../../src/dlq-table/lenient.ts";

setDefaultTimeout(60_000);

test("an object's fields as strings or numbers; other types, absent or empty fields are null", () => {
  expect(lenientFields({ raw_id: "r-1", device_id: 356938035643809, caller_num: "+447700900123" })).toEqual({
    raw_id: "r-1",
    device_id: "356938035643809",
    caller_prefix: "+44",
  });
  expect(lenientFields({ raw_id: { x: 1 }, device_id: "", caller_num: ["+44"] })).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
  // A field inherited, not the payload's own, is not read.
  expect(lenientFields(JSON.parse('{"__proto__":{"raw_id":"x"}}'))).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
});

test("malformed text: the first \"name\": value pair, escapes read, a long value cut to 256 characters", () => {
  expect(lenientFields('{"raw_id":"a\\"b","device_id": 42,"caller_num":"0049 151 12345678", oops')).toEqual({
    raw_id: 'a"b',
    device_id: "42",
    caller_prefix: "+49",
  });
  expect(lenientFields(`{"device_id":"${"d".repeat(300)}"`).device_id).toHaveLength(256);
  expect(lenientFields("not json at all")).toEqual({ raw_id: null, device_id: null, caller_prefix: null });
  expect(lenientFields('{"device_id":"unterminated')).toMatchObject({ device_id: null });
});

test("the caller prefix: international forms, the default region for national ones, null for what reads as no number", () => {
  expect(callerPrefix("+14155550123")).toBe("+1");
  expect(callerPrefix("011447700900123")).toBe("+44");
  expect(callerPrefix("07700900123", "GB")).toBe("+44");
  expect(callerPrefix("07700900123")).toBeNull();
  expect(callerPrefix("hello")).toBeNull();
  expect(callerPrefix("+" + "9".repeat(80))).toBeNull();
  expect(callerPrefix(null)).toBeNull();
});

/** The parse alone, as the prefix was read without the shortcut for plain "+digits" numbers. */
function parsedPrefix(caller: string, region?: CountryCode): string | null {
  try {
    const s = withInternationalPrefix(caller.trim());
    const n = s.startsWith("+") ? parsePhoneNumberFromString(s) : parsePhoneNumberFromString(s, region);
    return n?.countryCallingCode ? `+${n.countryCallingCode}` : null;
  } catch {
    return null;
  }
}

test("the shortcuts for plain +digits and national numbers answer as the parse does, on 300,000 numbers of every calling code, region and length", () => {
  // mulberry32: every residue comes up (an LCG in doubles loses its low bits and repeats).
  let seed = 7;
  const rnd = (n: number) => {
    let t = (seed = (seed + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const codes = [...new Set(getCountries().map((c) => getCountryCallingCode(c)))].concat(["800", "808", "870", "878", "881", "882", "883", "888", "979"]);
  const digits = (n: number) => Array.from({ length: n }, () => rnd(10)).join("");
  const differ: string[] = [];
  for (let i = 0; i < 200_000; i++) {
    // Half lead with a known code, half with any digits; lengths from too short to too long.
    const head = i % 2 ? codes[rnd(codes.length)]! : String(1 + rnd(9)) + digits(rnd(3));
    const n = `+${head}${digits(rnd(19))}`;
    if (callerPrefix(n) !== parsedPrefix(n) && differ.length < 10) differ.push(`${n}: ${callerPrefix(n)} vs ${parsedPrefix(n)}`);
  }
  // National numbers in every region; a third dialled abroad with the region's own international
  // prefix (the parse then reads the code after it), a few with another region's.
  const regions = getCountries();
  const metadata = new Metadata();
  const iddOf = (r: CountryCode) => {
    metadata.selectNumberingPlan(r);
    const plan = metadata.numberingPlan as unknown as { IDDPrefix(): string; defaultIDDPrefix(): string | undefined };
    const idd = plan.defaultIDDPrefix() ?? plan.IDDPrefix();
    return /^\d+$/.test(idd) ? idd : "";
  };
  for (let i = 0; i < 100_000; i++) {
    const r = regions[rnd(regions.length)]!;
    const abroad = i % 3 === 0 ? iddOf(i % 2 ? r : regions[rnd(regions.length)]!) + codes[rnd(codes.length)]! : "";
    const n = abroad + digits(1 + rnd(abroad ? 11 : 18));
    const [fast, parsed] = [callerPrefix(n, r), parsedPrefix(n, r)];
    if (fast !== parsed && differ.length < 10) differ.push(`${n} in ${r}: ${fast} vs ${parsed}`);
  }
  expect(differ).toEqual([]);
});
