import { expect, setDefaultTimeout, test } from "bun:test";
import { parseRecord } from "../../src/cdr/json.ts";

setDefaultTimeout(60_000);

test("integers up to 2^64−1 keep their exact digits; small ones stay numbers", () => {
  const r = parseRecord('{"a":18446744073709551615,"b":9007199254740993,"c":12,"d":1.5}');
  expect(r.ok).toBe(true);
  if (r.ok) expect(r.record).toEqual({ a: 18446744073709551615n, b: 9007199254740993n, c: 12, d: 1.5 });
});

test("never throws: hostile inputs become failures with a detail", () => {
  const deep = "[".repeat(100_000) + "]".repeat(100_000);
  for (const text of [deep, "\u0000", '{"a":1}x', "1e400", "{" + '"k":1,'.repeat(10) + "}"]) {
    const r = parseRecord(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.detail.length).toBeGreaterThan(0);
  }
});

test("10^5 keys and a 10^4-digit number still parse", () => {
  const many = "{" + Array.from({ length: 100_000 }, (_, i) => `"k${i}":${i}`).join(",") + "}";
  expect(parseRecord(many).ok).toBe(true);
  const r = parseRecord(`{"n":${"9".repeat(10_000)}}`);
  expect(r.ok).toBe(true);
  if (r.ok) expect(typeof r.record.n).toBe("number"); // Infinity: rejected by the field rules, not here
});
