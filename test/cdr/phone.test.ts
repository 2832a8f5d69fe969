import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { digitKey, PhoneNormalizer } from "../../src/cdr/phone.ts";
import verdicts from "../fixtures/phone-verdicts.json";

setDefaultTimeout(60_000);

describe("E.164 Phone Number Normalization", () => {
  const phone = new PhoneNormalizer({ cacheSize: 0 });

  test("verdicts match Google's libphonenumber (phonenumbers for Python) on 3,100 forms: numbers of many countries, tel: URIs, text and punctuation around them, other scripts, extensions", () => {
    const got = verdicts.cases.map((c) => ({ caller_num: c.caller_num, msisdn: phone.normalize(c.caller_num) }));
    expect(got).toEqual(verdicts.cases);
  });

  test("Leading international prefix normalization: 00 and 011 become +", () => {
    expect(phone.normalize("004915112345678")).toBe("+4915112345678");
    expect(phone.normalize("0033612345678")).toBe("+33612345678");
    expect(phone.normalize("01112015550123")).toBe("+12015550123");
  });

  test("Existing E.164 number preserved", () => {
    expect(phone.normalize("+447400123456")).toBe("+447400123456");
  });

  test("Unparseable phone number: a number of a possible length that does not exist is invalid", () => {
    expect(phone.normalize("+10005550123")).toBeNull(); // NANP area codes never start with 0
    expect(phone.normalize("+497000000000")).toBeNull();
    expect(phone.normalize("+999123456789")).toBeNull(); // unassigned country code
  });

  test("numbers without an international prefix are invalid unless DEFAULT_PHONE_REGION is set", () => {
    expect(phone.normalize("015112345678")).toBeNull();
    expect(new PhoneNormalizer({ defaultRegion: "DE" }).normalize("015112345678")).toBe("+4915112345678");
  });
});

describe("phone verdict cache", () => {
  test("is bounded, counts hits and misses, and never changes a verdict", () => {
    const cached = new PhoneNormalizer({ cacheSize: 4 });
    const plain = new PhoneNormalizer({ cacheSize: 0 });
    const inputs = ["+4915112345678", "+491234", "0033612345678", "+4915112345678", "+447400123456", "+491234", "+4915112345678"];
    for (const s of inputs) expect(cached.normalize(s)).toBe(plain.normalize(s));
    expect(cached.size).toBeLessThanOrEqual(4);
    expect(cached.hits + cached.misses).toBe(inputs.length);
    expect(cached.hits).toBeGreaterThan(0);
  });
});

describe("digitKey: the cache's number for digit-only strings", () => {
  test("is distinct for distinct strings: leading zeros, the plus sign and the length all count", () => {
    const forms = ["0", "00", "000", "1", "01", "001", "+1", "+01", "+0", "33", "033", "0033", "+33", "+033", "0033600009252", "033600009252",
      "+33600009252", "33600009252", "999999999999999", "+999999999999999", "000000000000000", "100000000000000", "+100000000000000"];
    const keys = forms.map(digitKey);
    expect(keys.every((k) => k !== 0 && Number.isSafeInteger(k))).toBe(true);
    expect(new Set(keys).size).toBe(forms.length);
    // And on 200k random digit strings of 1-15 digits, with and without "+": no two share a key.
    const seen = new Map<number, string>();
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    let collisions = 0;
    for (let i = 0; i < 200_000; i++) {
      const len = 1 + Math.floor(rnd() * 15);
      let s = rnd() < 0.5 ? "+" : "";
      for (let j = 0; j < len; j++) s += String(Math.floor(rnd() * (j < 3 ? 2 : 10)));
      const k = digitKey(s);
      const before = seen.get(k);
      if (before !== undefined && before !== s) collisions++;
      seen.set(k, s);
    }
    expect(collisions).toBe(0);
  });

  test("is 0 (the string itself is the key) for anything but 1-15 digits after an optional plus", () => {
    for (const s of ["", "+", "++1", "1+", "+33 6", "0033-6", "１２３", "3.5", "-1", "1234567890123456", "+1234567890123456", "12a"]) expect(digitKey(s)).toBe(0);
  });

  test("a cache keyed by it gives each form its own verdict", () => {
    const cached = new PhoneNormalizer({ cacheSize: 100 });
    const forms = ["+33612345678", "0033612345678", "033612345678", "33612345678", "+033612345678", "+33 612345678"];
    const plain = forms.map((s) => PhoneNormalizer.reference(s));
    for (let round = 0; round < 3; round++) expect(forms.map((s) => cached.normalize(s))).toEqual(plain);
    expect(cached.hits).toBe(2 * forms.length);
  });
});

test("the fast path never changes a verdict: 60k random and synthetic numbers against the reference path", () => {
  const fast = new PhoneNormalizer({ cacheSize: 0 });
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  let differences = 0;
  let valid = 0;
  for (let i = 0; i < 60_000; i++) {
    const digits = String(Math.floor(rnd() * 1e16)).slice(0, 6 + Math.floor(rnd() * 10));
    const form = i % 4;
    const raw = form === 0 ? `+${digits}` : form === 1 ? `00${digits}` : form === 2 ? `+${digits.slice(0, 2)}0${digits.slice(2)}` : `+${digits.slice(0, 2)} ${digits.slice(2)}`;
    const got = fast.normalize(raw);
    if (got !== null) valid++;
    if (got !== PhoneNormalizer.reference(raw)) differences++;
  }
  expect(differences).toBe(0);
  expect(valid).toBeGreaterThan(1000);
});
