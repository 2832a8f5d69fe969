// Regression: copying several small payloads into one slab must keep every byte. A small typed
// array's first subarray() used to move its storage away from the pointer being written.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ptr, type Pointer } from "bun:ffi";
import { copyIntoSlab } from "../../src/kafka/message.ts";

setDefaultTimeout(60_000);

test("copyIntoSlab keeps every payload of a poll intact, small slabs included", () => {
  const enc = new TextEncoder();
  for (const n of [1, 2, 3, 10, 500]) {
    const payloads = Array.from({ length: n }, (_, i) => enc.encode(`{"i":${i},"v":"${"x".repeat(i % 7)}"}`));
    for (const p of payloads) void p.buffer; // stable source pointers
    const views = copyIntoSlab(payloads.map((p) => ptr(p) as Pointer), payloads.map((p) => p.length), n);
    expect(views.map((v) => new TextDecoder().decode(v!))).toEqual(payloads.map((p) => new TextDecoder().decode(p)));
  }
  expect(copyIntoSlab([null], [0], 1)).toEqual([null]);
});
