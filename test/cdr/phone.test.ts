import { describe, expect, test } from "bun:test";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import verdicts from "../fixtures/phone-verdicts.json";

describe("E.164 Phone Number Normalization", () => {
  const phone = new PhoneNormalizer({ cacheSize: 0 });

  test("verdicts match Google's libphonenumber (phonenumbers for Python) for mobile and fixed numbers of many countries", () => {
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
