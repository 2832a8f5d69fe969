/**
 * Whether a JSON text reads in every common JSON reader at its defaults, so an envelope that
 * splices it in as an object does not crash the DLQ consumer meant to inspect it. JSON.parse took
 * the text; the others refuse more:
 * - Python's `json` recurses once a level and fails near 1,000 levels, fewer for a caller already
 *   deep in its own stack; it refuses an integer of more than 4,300 digits.
 * - Jackson 2.15+ (StreamReadConstraints) refuses nesting past 1,000 levels, a number of more than
 *   1,000 characters, and (2.16+) a property name of more than 50,000 characters.
 * The limits sit within all of them, with room below Python's stack: a text past one travels as a
 * string, which the envelope allows (original_payload is an object or a string).
 */

export const PORTABLE_LIMITS = {
  /** Levels of objects and arrays. */
  depth: 500,
  /** Characters of one number, sign and exponent included. */
  numberChars: 1_000,
  /** Characters of one property name as written (escapes counted as written: never fewer than read). */
  nameChars: 50_000,
} as const;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/** Characters a number is made of (also in true/false, whose one `e` counts as a run of one). */
function numberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;
}

/**
 * Why a JSON text (one JSON.parse accepted) would fail in a common reader, or null when none would.
 * One pass, no recursion: the texts it is asked about are the ones that nest deepest.
 */
export function unportable(text: string): string | null {
  const { depth: maxDepth, numberChars, nameChars } = PORTABLE_LIMITS;
  let depth = 0;
  let run = 0;
  let lastString = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
      lastString = i - start - 1;
      run = 0;
      continue;
    }
    if (numberChar(c)) {
      if (++run > numberChars) return `a number longer than ${numberChars} characters`;
      continue;
    }
    run = 0;
    if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return `nesting deeper than ${maxDepth} levels`;
    } else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === COLON && lastString > nameChars) return `a property name longer than ${nameChars} characters`;
  }
  return null;
}
