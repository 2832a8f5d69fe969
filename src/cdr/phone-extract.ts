/**
 * The lenient first half of Google libphonenumber's parse(): what it takes out of a caller_num
 * before it looks at digits at all. libphonenumber-js, which does the second half here, extracts
 * differently (it refuses "＋49…", "++49…", "+1-800-FLOWERS" and RFC 3966 domain contexts, and
 * accepts "sip:+44…@host" and trailing words that Google refuses), so this is a port of Google's
 * steps, in its order, from PhoneNumberUtil (Java) / phonenumberutil.py:
 *   length ≤ 250 → buildNationalNumberForParsing (RFC 3966 `tel:` with phone-context and isub, or
 *   extractPossibleNumber) → isViablePhoneNumber → a leading plus when there is no default region
 *   → maybeStripExtension → normalize (digits of any script; vanity letters when ≥ 3).
 * test/cdr/phone.test.ts compares the verdicts with Python phonenumbers on every form in
 * test/fixtures/phone-verdicts.json.
 */

const DIGIT = "\\p{Nd}";
const PLUS_CHARS = "+\uFF0B";
const VALID_PUNCTUATION =
  "\\-x\u2010-\u2015\u2212\u30FC\uFF0D-\uFF0F \u00A0\u00AD\u200B\u2060\u3000" +
  "()\uFF08\uFF09\uFF3B\uFF3D.\\[\\]/~\u2053\u223C\uFF5E";
const VALID_ALPHA = "A-Za-z";
const STAR = "*";
const MIN_LENGTH_FOR_NSN = 2;
const MAX_INPUT_STRING_LENGTH = 250;

const VALID_START_CHAR = new RegExp(`[${PLUS_CHARS}${DIGIT}]`, "u");
const SECOND_NUMBER_START = /[\\/] *x/u;
// Java: [[\P{N}&&\P{L}]&&[^#]]+$ ; Python: (?:_|[^#\w])+$
const UNWANTED_END_CHARS = /(?:_|[^#\p{L}\p{N}_])+$/u;
const VALID_ALPHA_PHONE = /^(?:.*?[A-Za-z]){3}/su;
const LEADING_PLUS = new RegExp(`^[${PLUS_CHARS}]+`, "u");

const extnDigits = (max: number) => `(${DIGIT}{1,${max}})`;

/** createExtnPattern(forParsing = true). Six capturing groups, the extension digits. */
function extensionPattern(): string {
  const separators = "[ \u00A0\\t,]*";
  const afterLabel = "[:\\.\uFF0E]?[ \u00A0\\t,-]*";
  const suffix = "#?";
  const explicit = "(?:e?xt(?:ensi(?:o\u0301?|\u00F3))?n?|\uFF45?\uFF58\uFF54\uFF4E?|\u0434\u043E\u0431|anexo)";
  const ambiguous = "(?:[x\uFF58#\uFF03~\uFF5E]|int|\uFF49\uFF4E\uFF54)";
  const ambiguousSeparator = "[- ]+";
  const rfc = ";ext=" + extnDigits(20);
  const explicitExtn = separators + explicit + afterLabel + extnDigits(20) + suffix;
  const ambiguousExtn = separators + ambiguous + afterLabel + extnDigits(9) + suffix;
  const american = ambiguousSeparator + extnDigits(6) + "#";
  const noComma = "[ \u00A0\\t]*";
  const autoDialling = noComma + "(?:,{2}|;)" + afterLabel + extnDigits(15) + suffix;
  const onlyCommas = noComma + "(?:,)+" + afterLabel + extnDigits(9) + suffix;
  return [rfc, explicitExtn, ambiguousExtn, american, autoDialling, onlyCommas].join("|");
}

const EXTN = extensionPattern();
const VALID_PHONE_NUMBER =
  `${DIGIT}{${MIN_LENGTH_FOR_NSN}}|[${PLUS_CHARS}]*(?:[${VALID_PUNCTUATION}${STAR}]*${DIGIT}){3,}` +
  `[${VALID_PUNCTUATION}${STAR}${VALID_ALPHA}${DIGIT}]*`;
const VIABLE = new RegExp(`^(?:${VALID_PHONE_NUMBER}(?:${EXTN})?)$`, "iu");
const EXTENSION_AT_END = new RegExp(`(?:${EXTN})$`, "iu");

const ALPHANUM = VALID_ALPHA + DIGIT;
const RFC3966_GLOBAL_NUMBER_DIGITS = new RegExp(
  `^\\+(?:${DIGIT}|[\\-\\.\\(\\)]?)*${DIGIT}(?:${DIGIT}|[\\-\\.\\(\\)]?)*$`,
  "u",
);
const RFC3966_DOMAINNAME = new RegExp(
  `^(?:[${ALPHANUM}]+(?:-*[${ALPHANUM}])*\\.)*[${VALID_ALPHA}]+(?:-*[${ALPHANUM}])*\\.?$`,
  "u",
);

const ALPHA_KEYS: Record<string, string> = {};
for (const [digit, letters] of [
  ["2", "ABC"],
  ["3", "DEF"],
  ["4", "GHI"],
  ["5", "JKL"],
  ["6", "MNO"],
  ["7", "PQRS"],
  ["8", "TUV"],
  ["9", "WXYZ"],
] as const) {
  for (const l of letters) ALPHA_KEYS[l] = digit;
}

export type Extracted =
  /** The number in international form: "+" and ASCII digits. */
  | { international: string; national?: undefined }
  /** No leading plus: the digits for a default region to interpret. */
  | { international?: undefined; national: string }
  | null;

/**
 * What Google's parse() would go on to read in `s`, or null where it refuses the input outright
 * (too long, no phone-context syntax, not viable, no plus without a default region).
 */
export function extractNumber(s: string, hasDefaultRegion: boolean): Extracted {
  if (s.length > MAX_INPUT_STRING_LENGTH && [...s].length > MAX_INPUT_STRING_LENGTH) return null;
  const built = buildNationalNumberForParsing(s);
  if (built === null || !isViable(built)) return null;
  const plus = LEADING_PLUS.exec(built);
  if (!plus && !hasDefaultRegion) return null;
  const withoutExtension = stripExtension(built);
  if (plus)
    return {
      international: "+" + normalize(withoutExtension.slice(LEADING_PLUS.exec(withoutExtension)?.[0].length ?? 0)),
    };
  return { national: normalize(withoutExtension) };
}

function buildNationalNumberForParsing(s: string): string | null {
  const contextAt = s.indexOf(";phone-context=");
  let national: string;
  if (contextAt >= 0) {
    const start = contextAt + ";phone-context=".length;
    const end = s.indexOf(";", start);
    const context = s.slice(start, end < 0 ? undefined : end);
    if (context.length === 0 || !(RFC3966_GLOBAL_NUMBER_DIGITS.test(context) || RFC3966_DOMAINNAME.test(context)))
      return null;
    // A global-number context is the number's prefix; a domain adds nothing.
    national = context.startsWith("+") ? context : "";
    const tel = s.indexOf("tel:");
    national += s.slice(tel >= 0 ? tel + 4 : 0, contextAt);
  } else {
    national = extractPossibleNumber(s);
  }
  const isub = national.indexOf(";isub=");
  return isub > 0 ? national.slice(0, isub) : national;
}

function extractPossibleNumber(s: string): string {
  const start = VALID_START_CHAR.exec(s);
  if (!start) return "";
  let n = s.slice(start.index);
  const trailing = UNWANTED_END_CHARS.exec(n);
  if (trailing) n = n.slice(0, trailing.index);
  const second = SECOND_NUMBER_START.exec(n);
  if (second) n = n.slice(0, second.index);
  return n;
}

function isViable(n: string): boolean {
  return n.length >= MIN_LENGTH_FOR_NSN && VIABLE.test(n);
}

/** maybeStripExtension: the number before an extension, when what precedes it is viable. */
function stripExtension(n: string): string {
  const m = EXTENSION_AT_END.exec(n);
  return m && isViable(n.slice(0, m.index)) ? n.slice(0, m.index) : n;
}

/** Digits of any script to ASCII; with three or more letters, letters by the E.161 keypad. */
function normalize(n: string): string {
  let out = "";
  if (VALID_ALPHA_PHONE.test(n)) {
    // Google's alpha path keeps ASCII digits and mapped letters only.
    for (const c of n) {
      if (c >= "0" && c <= "9") out += c;
      else {
        const d = ALPHA_KEYS[c.toUpperCase()];
        if (d !== undefined) out += d;
      }
    }
    return out;
  }
  for (const c of n) {
    const d = digitValue(c);
    if (d >= 0) out += d;
  }
  return out;
}

const ND = /^\p{Nd}$/u;

/** The value of a decimal digit of any script (Unicode lays each script's 0-9 out as one run of ten). */
function digitValue(c: string): number {
  if (c >= "0" && c <= "9") return c.charCodeAt(0) - 48;
  if (!ND.test(c)) return -1;
  let cp = c.codePointAt(0)!;
  let start = cp;
  while (start > 0 && ND.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}
