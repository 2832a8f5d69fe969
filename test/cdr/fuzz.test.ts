// ≥ 100k random mutations of valid records never throw and always yield a row or a rejection
// whose reason is in the taxonomy and whose field is one of the record's.
import { expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { FAILURE_REASONS, REQUIRED_FIELDS } from "../../src/cdr/fields.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { rng, SyntheticCdrs } from "../../src/generate/synthetic.ts";

setDefaultTimeout(60_000);

const FIELDS = [...REQUIRED_FIELDS, "source_ip", "total_bytes"];
const VALUES: unknown[] = [null, true, false, 0, -1, 1.5, 2 ** 53 + 1, "", "x", "+4915112345678", [], {}, [1], { a: 1 }, "\u0000", 1e308, -0, "9".repeat(30)];

test("fuzz: 120k mutated records never throw and always map into the taxonomy", () => {
  const r = rng(7);
  const gen = new SyntheticCdrs({ seed: 3, invalidShare: 0 });
  const ctx = { phone: new PhoneNormalizer({ cacheSize: 1000 }) };
  const enc = new TextEncoder();
  const reasons = new Set<string>(FAILURE_REASONS);
  let rows = 0;
  let rejected = 0;
  for (let i = 0; i < 120_000; i++) {
    const base = JSON.parse(gen.next().text) as Record<string, unknown>;
    let text: string;
    const op = Math.floor(r() * 6);
    const key = FIELDS[Math.floor(r() * FIELDS.length)]!;
    if (op === 0) { delete base[key]; text = JSON.stringify(base); }
    else if (op === 1) { base[key] = VALUES[Math.floor(r() * VALUES.length)]; text = JSON.stringify(base); }
    else if (op === 2) { text = JSON.stringify(base).replace(`"${key}":`, `"${key}":${JSON.stringify(base[key])},"${key}":`); }
    else if (op === 3) { const s = JSON.stringify(base); text = s.slice(0, Math.floor(r() * s.length)); }
    else if (op === 4) { const b = enc.encode(JSON.stringify(base)); b[Math.floor(r() * b.length)] = Math.floor(r() * 256); text = ""; const d = decode(b, ctx); check(d); continue; }
    else text = JSON.stringify(base);
    check(decode(text, ctx));
  }
  function check(d: ReturnType<typeof decode>) {
    if (d.ok) {
      rows++;
      expect(d.row.cdr_id).toMatch(/^[0-9a-f-]{36}$/);
    } else {
      rejected++;
      if (!reasons.has(d.rejection.reason)) throw new Error(`reason outside taxonomy: ${d.rejection.reason}`);
      if (d.rejection.field !== null && !FIELDS.includes(d.rejection.field)) throw new Error(`unknown field ${d.rejection.field}`);
    }
  }
  expect(rows + rejected).toBe(120_000);
  expect(rows).toBeGreaterThan(10_000);
  expect(rejected).toBeGreaterThan(10_000);
});
