// Header texts reused from the last record's are the texts the bytes decode to, whatever comes in
// between: a value of the same length changed, names past the kept ones, a name's values that never
// repeat, a __proto__ header, a name twice (the last wins, as Object.fromEntries takes them).
import { expect, setDefaultTimeout, test } from "bun:test";
import { headerTexts } from "../../src/dlq/header-text.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const reference = (h: Array<[string, Uint8Array]>) => Object.fromEntries(h.map(([k, v]) => [k, new TextDecoder().decode(v)]));

test("every record's header texts are its bytes decoded, the kept texts reused only for the same bytes", () => {
  const records: Array<Array<[string, Uint8Array]>> = [];
  for (let i = 0; i < 500; i++) {
    const h: Array<[string, Uint8Array]> = [
      ["dlq.source.topic", enc.encode(i % 7 ? "cdr.raw" : "cdr.rax")],
      ["dlq.source.offset", enc.encode(String(i))],
      ["dlq.error.detail", enc.encode(i % 3 ? "rat: 7 is not a radio access type" : "rat: 8 is not a radio access type")],
      ["dlq.source.sha256", enc.encode(Bun.SHA256.hash(String(i), "hex"))],
      ["long", enc.encode("é".repeat(40 + (i % 50)))],
      ["bytes", Uint8Array.of(0xff, i % 2 ? 0xfe : 0x41)],
      [`name-${i % 40}`, enc.encode("x")],
    ];
    if (i % 5 === 0) h.push(["__proto__", enc.encode("p")], ["dlq.source.topic", enc.encode("last wins")]);
    records.push(h);
  }
  for (const [i, h] of records.entries()) {
    const got = headerTexts(h);
    expect({ i, got }).toEqual({ i, got: reference(h) });
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
  }
  // The kept bytes are a copy: the batch's memory reused for the next records changes nothing kept.
  const slab = enc.encode("stage-a");
  expect(headerTexts([["dlq.error.stage", slab]])["dlq.error.stage"]).toBe("stage-a");
  slab[6] = 0x62;
  expect(headerTexts([["dlq.error.stage", slab]])["dlq.error.stage"]).toBe("stage-b");
  expect(headerTexts(undefined)).toEqual({});
});
