// The valibot schema is the straightforward reference; field-checks.ts is the hot path. Both must
// name the same field (or none) for every record.
import { expect, setDefaultTimeout, test } from "bun:test";
import { checkFieldTypes } from "../../src/cdr/field-checks.ts";
import { REQUIRED_FIELDS } from "../../src/cdr/fields.ts";
import { firstTypeIssue } from "../../src/cdr/schema.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";

setDefaultTimeout(60_000);

const VALUES: unknown[] = [
  null, undefined, true, false, 0, -1, 1, 6, 1.5, -0.5, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), Infinity, -Infinity,
  18446744073709551615n, 18446744073709551616n, -18446744073709551615n, -18446744073709551616n, 9007199254740993n, 5n,
  "", "x", "x".repeat(15), "x".repeat(16), "x".repeat(32), "x".repeat(33), "x".repeat(64), "x".repeat(65), "x".repeat(256), "x".repeat(257),
  [], {}, [1], { a: 1 },
];

test("hot-path field checks agree with the valibot schema on 200k mutated records", () => {
  const gen = new SyntheticCdrs({ seed: 5, invalidShare: 0 });
  const fields = [...REQUIRED_FIELDS, "source_ip"];
  let seed = 99;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  let issues = 0;
  for (let i = 0; i < 200_000; i++) {
    const r = JSON.parse(gen.next().text) as Record<string, unknown>;
    const mutations = 1 + Math.floor(rnd() * 2);
    for (let k = 0; k < mutations; k++) r[fields[Math.floor(rnd() * fields.length)]!] = VALUES[Math.floor(rnd() * VALUES.length)];
    const slow = firstTypeIssue(r);
    const fast = checkFieldTypes(r);
    if (slow?.field !== fast?.field) throw new Error(`disagree on ${JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}: schema ${slow?.field}, fast ${fast?.field}`);
    if (fast) issues++;
  }
  expect(issues).toBeGreaterThan(50_000);
});
