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

// A big integer sends the record down the exact-number path; a reviver there recursed through the
// nesting beside it and overflowed the stack at 5,000 levels, stopping every owner of the partition.
test("regression: a big integer beside 5,000 to 100,000 levels of nesting parses, the integer exact", () => {
  for (const depth of [5_000, 20_000, 100_000]) {
    for (const nest of ["[", '{"a":']) {
      const close = nest === "[" ? "]" : "}";
      const text = `{"raw_id":"r","big":18446744073709551615,"x":${nest.repeat(depth)}1${close.repeat(depth)}}`;
      const r = parseRecord(text);
      expect(r.ok).toBe(true);
      if (r.ok) expect(r.record.big).toBe(18446744073709551615n);
    }
  }
});

test("exact integers: the last of duplicate keys wins, escaped and __proto__ keys count, nested ones stay numbers", () => {
  const r = parseRecord(
    '{"a":18446744073709551615,"a":1,"b":2,"b":18446744073709551614,"\\u0063":9007199254740993,' +
      '"__proto__":18446744073709551613,"s":"\\"}{[","n":[{"q":18446744073709551615}]}',
  );
  expect(r.ok).toBe(true);
  if (!r.ok) return;
  expect(r.record.a).toBe(1);
  expect(r.record.b).toBe(18446744073709551614n);
  expect(r.record.c).toBe(9007199254740993n);
  expect(Object.getOwnPropertyDescriptor(r.record, "__proto__")?.value).toBe(18446744073709551613n);
  expect(Object.getPrototypeOf(r.record)).toBe(Object.prototype);
  expect(r.record.s).toBe('"}{[');
  expect(typeof (r.record.n as Array<{ q: unknown }>)[0]!.q).toBe("number");
});
