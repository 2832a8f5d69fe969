/**
 * The input of the whole-envelope MAC (provenance-mac.ts, form 3), laid out in one buffer:
 *   v3\n<scope>\n<topic>\n<partition>\n<offset>\n<digest>\nvalue <bytes or -1>\n<value>
 * then each header the worker writes, sorted by name: `<name> <bytes>\n<value>`. Every part carries
 * its length, so no text can pass for another's boundary. One buffer makes one hash call, where a
 * call per part (19 for the worker's envelope) cost the DLQ filler 1.6 µs an envelope against 0.7.
 * A value over SPLIT_BYTES is hashed where it lies instead of copied. test/dlq/mac-input.test.ts
 * holds it to the parts hashed one by one.
 */
import { HEADERS } from "./envelope.ts";

type Bytes = Uint8Array | string;
export type Header = readonly [string, Bytes];

/** The headers form 3 covers, in the order it hashes them: every header the worker writes but the MAC. */
const SIGNED: readonly string[] = Object.values(HEADERS)
  .filter((h) => h !== HEADERS.sourceMac)
  .sort();
const SLOT: ReadonlyMap<string, number> = new Map(SIGNED.map((name, i) => [name, i]));
const utf8 = new TextEncoder();
/** `<name> ` of each signed header, as bytes. */
const NAME_BYTES = SIGNED.map((n) => utf8.encode(`${n} `));

/** A value this long is hashed in place: copying 8 MiB to save two calls is no saving. */
const SPLIT_BYTES = 64 * 1024;

/** Each signed header's value in this record, by slot; reset after every use. */
const found: Array<Bytes | undefined> = new Array(SIGNED.length).fill(undefined);
/** The scratch's size kept between records: a worker's envelope fits, its value past SPLIT_BYTES aside. */
const KEPT_SCRATCH_BYTES = 128 * 1024;
let scratch = new Uint8Array(KEPT_SCRATCH_BYTES);

/** Something that takes bytes: a keyed hasher. */
export interface Sink {
  update(data: Uint8Array): unknown;
}

const VALUE = utf8.encode("value ");
const NEWLINE = 0x0a;

/**
 * Feeds form 3's input for `prefix` (the `v3` line through the digest's, made by the caller), the
 * value and the headers to `sink`. False, feeding nothing, when a header the worker writes appears
 * twice: no worker envelope has that, and which copy a reader takes is its own.
 */
export function feedMacInput(
  sink: Sink,
  prefix: string,
  value: Bytes | null,
  headers: readonly Header[] | undefined,
): boolean {
  if (!collect(headers)) return false;
  const v = typeof value === "string" ? utf8.encode(value) : value;
  // The most the headers and the prefix can take (a header's length line included), in one check.
  let most = prefix.length * 3 + 32 + (v !== null && v.length <= SPLIT_BYTES ? v.length : 0);
  for (let slot = 0; slot < SIGNED.length; slot++) {
    const h = found[slot];
    if (h !== undefined) most += NAME_BYTES[slot]!.length + 16 + (typeof h === "string" ? h.length * 3 : h.length);
  }
  if (most > scratch.length) scratch = new Uint8Array(Math.max(most, scratch.length * 2));
  const buf = scratch;
  let at = utf8.encodeInto(prefix, buf).written;
  at = copy(buf, at, VALUE);
  if (v === null) {
    buf[at++] = 0x2d; // "-1"
    buf[at++] = 0x31;
  } else at = writeUint(buf, at, v.length);
  buf[at++] = NEWLINE;
  if (v !== null && v.length > SPLIT_BYTES) {
    sink.update(buf.subarray(0, at));
    sink.update(v);
    at = 0;
  } else if (v !== null) at = copy(buf, at, v);
  for (let slot = 0; slot < SIGNED.length; slot++) {
    const h = found[slot];
    if (h === undefined) continue;
    found[slot] = undefined;
    const b = typeof h === "string" ? utf8.encode(h) : h;
    at = copy(buf, at, NAME_BYTES[slot]!);
    at = writeUint(buf, at, b.length);
    buf[at++] = NEWLINE;
    at = copy(buf, at, b);
  }
  sink.update(buf.subarray(0, at));
  // A record anyone wrote may carry a worker header of megabytes: its room is not kept after it.
  if (scratch.length > KEPT_SCRATCH_BYTES) scratch = new Uint8Array(KEPT_SCRATCH_BYTES);
  return true;
}

/** Puts each signed header in its slot; false (every slot cleared) on a repeat. */
function collect(headers: readonly Header[] | undefined): boolean {
  if (headers === undefined) return true;
  for (let i = 0; i < headers.length; i++) {
    const [name, v] = headers[i]!;
    const slot = SLOT.get(name);
    if (slot === undefined) continue;
    if (found[slot] !== undefined) {
      found.fill(undefined);
      return false;
    }
    found[slot] = v;
  }
  return true;
}

/** Copies `b` to `buf` at `at`; a short one byte by byte, where set()'s call costs more than the copy. */
function copy(buf: Uint8Array, at: number, b: Uint8Array): number {
  const n = b.length;
  if (n > 64) buf.set(b, at);
  else for (let i = 0; i < n; i++) buf[at + i] = b[i]!;
  return at + n;
}

/** `n`'s decimal digits. */
function writeUint(buf: Uint8Array, at: number, n: number): number {
  let digits = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++;
  for (let i = at + digits - 1, x = n; i >= at; i--, x = Math.floor(x / 10)) buf[i] = 0x30 + (x % 10);
  return at + digits;
}
