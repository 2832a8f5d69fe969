// The flat-record scanner must build exactly what JSON.parse builds, or refuse (undefined) so the
// caller takes JSON.parse. Checked on hand-picked edge cases and on 100k mutated records.
import { expect, setDefaultTimeout, test } from "bun:test";
import { scanFlatObject } from "../../src/cdr/flat-json.ts";
import { rng, SyntheticCdrs } from "../../src/generate/synthetic.ts";

setDefaultTimeout(60_000);

/** JSON.parse's verdict in a comparable form: own entries in order, or "throws". */
function reference(text: string): unknown {
  try {
    const v = JSON.parse(text);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? Object.entries(v) : `not an object: ${typeof v}`;
  } catch {
    return "throws";
  }
}

function agrees(text: string): "accepted" | "refused" {
  // Twice: the second scan reuses the keys remembered from the first (another code path).
  const first = scanFlatObject(text);
  const got = scanFlatObject(text);
  expect(got === undefined).toBe(first === undefined);
  if (first !== undefined) expect(Object.entries(first)).toEqual(Object.entries(got!));
  if (got === undefined) return "refused";
  // Accepted: same entries, same order, same types (1 vs "1", -0 vs 0 would differ here).
  expect([text, Object.entries(got)]).toEqual([text, reference(text) as [string, unknown][]]);
  for (const [k, v] of Object.entries(got)) expect(Object.is(v, (JSON.parse(text) as Record<string, unknown>)[k])).toBe(true);
  expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
  return "accepted";
}

test("accepted shapes parse exactly as JSON.parse does", () => {
  const accepted = [
    "{}", " { } ", '{"a":1}', '{"a":-1,"b":0,"c":123456789012345}', '{"a":"x","b":"","c":"é€😀"}',
    '{"a":null,"b":true,"c":false}', ' {\t"a" :\n1 ,\r"b": "x" }\n', '{"a":1,"a":2}', '{"a":1,"b":2,"a":3}',
    '{"1":"x","a":1,"0":2}', '{"constructor":1,"toString":"x"}', '{"raw_id":"r1","rat":9}',
  ];
  for (const t of accepted) expect(agrees(t)).toBe("accepted");
});

test("everything else is refused, so JSON.parse decides", () => {
  const refused = [
    "", " ", "[]", "1", '"x"', "null", '{"a":1.5}', '{"a":1e3}', '{"a":1E3}', '{"a":-0}', '{"a":01}', '{"a":-}',
    '{"a":1234567890123456}', '{"a":"x\\"y"}', '{"a":"\\u0041"}', '{"a":"tab\there"}', '{"a":{"b":1}}', '{"a":[1]}',
    '{"__proto__":1}', '{"a":1,}', '{"a":1} x', '{"a" 1}', '{a:1}', "{'a':1}", '{"a":tru}', '{"a":nul}', '{"a":1',
    '{"a":"x', '{"a":+1}', '{"a":NaN}', '{"a":Infinity}', '{"a":1}}',
  ];
  for (const t of refused) expect(agrees(t)).toBe("refused");
});

test("100k mutated records: whatever the scanner accepts equals JSON.parse", () => {
  const r = rng(11);
  const gen = new SyntheticCdrs({ seed: 5, invalidShare: 0.2 });
  const alphabet = ' "{}[],:.-+eE0123456789\\tnulfase\u00e9\n';
  const counts = { accepted: 0, refused: 0 };
  for (let i = 0; i < 100_000; i++) {
    let text = gen.next().text;
    const op = Math.floor(r() * 5);
    const at = Math.floor(r() * text.length);
    if (op === 1) text = text.slice(0, at) + alphabet[Math.floor(r() * alphabet.length)] + text.slice(at + 1);
    else if (op === 2) text = text.slice(0, at) + alphabet[Math.floor(r() * alphabet.length)] + text.slice(at);
    else if (op === 3) text = text.slice(0, at) + text.slice(at + 1);
    else if (op === 4) text = text.slice(0, at);
    counts[agrees(text)]++;
  }
  // Not vacuous: most records take the fast path, and many mutations are refused.
  expect(counts.accepted).toBeGreaterThan(30_000);
  expect(counts.refused).toBeGreaterThan(20_000);
});
