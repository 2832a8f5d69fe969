/**
 * A DLQ record's headers as text, by name (the last of a name wins, as Object.fromEntries takes
 * them). The worker's envelopes repeat most of their header values (the source topic, the stage,
 * the MAC's form, a reason's detail): each name's last short value is kept with its bytes, and a
 * value of the same bytes reuses its text instead of being decoded again. Decoding every header of
 * every envelope was a tenth of the DLQ filler's CPU.
 */
const decoder = new TextDecoder();
const OWN = { enumerable: true, writable: true, configurable: true } as const;

/** Longest value whose text is kept for the next record: comparing more costs what decoding does. */
const MAX_KEPT_BYTES = 64;
/** Most names whose last value is kept: anyone may write headers of any names to the DLQ topic. */
const MAX_KEPT_NAMES = 32;

/** Each name's last short value; `misses` in a row, after which a name's values (a digest, an offset) are not kept. */
const kept = new Map<string, { bytes: Uint8Array; text: string; misses: number }>();
const MAX_MISSES = 16;

export function headerTexts(headers: ReadonlyArray<readonly [string, Uint8Array]> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined) return out;
  for (let i = 0; i < headers.length; i++) {
    const [name, v] = headers[i]!;
    const text = textOf(name, v);
    // A header named __proto__ is a property like any other, never the object's prototype.
    if (name === "__proto__") Object.defineProperty(out, name, { value: text, ...OWN });
    else out[name] = text;
  }
  return out;
}

function textOf(name: string, v: Uint8Array): string {
  if (v.length > MAX_KEPT_BYTES) return decoder.decode(v);
  const last = kept.get(name);
  if (last === undefined) {
    const text = decoder.decode(v);
    if (kept.size < MAX_KEPT_NAMES) kept.set(name, { bytes: v.slice(), text, misses: 0 });
    return text;
  }
  if (last.misses < MAX_MISSES && sameBytes(last.bytes, v)) {
    last.misses = 0;
    return last.text;
  }
  const text = decoder.decode(v);
  if (last.misses < MAX_MISSES) {
    last.misses++;
    last.bytes = v.slice();
    last.text = text;
  }
  return text;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
