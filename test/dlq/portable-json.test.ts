// Envelopes every DLQ consumer can read: an object payload past what Python's json or Jackson takes
// at their defaults travels as a string. Both readers judge, not a copy of their limits.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelopeOf } from "../../src/dlq/envelope.ts";
import { PORTABLE_LIMITS, unportable } from "../../src/dlq/portable-json.ts";
import { jackson, pythonJson, unreadable } from "../support/json-readers.ts";

setDefaultTimeout(60_000);

const { depth, numberChars, nameChars } = PORTABLE_LIMITS;
const arrays = (n: number) => `{"x":${"[".repeat(n - 1)}${"]".repeat(n - 1)}}`;
const objects = (n: number) => `${'{"a":'.repeat(n)}0${"}".repeat(n)}`;
const number = (chars: number) => `{"n":${"7".repeat(chars)}}`;
const name = (chars: number) => `{"${"k".repeat(chars)}":1}`;

// At each limit, and one past it; well past the readers' own limits; and look-alikes inside strings.
const AT = [arrays(depth), objects(depth), number(numberChars), `{"n":-1.${"5".repeat(numberChars - 6)}e+9}`, name(nameChars)];
const PAST = [arrays(depth + 1), objects(depth + 1), number(numberChars + 1), name(nameChars + 1)];
const FAR_PAST = [arrays(5_000), objects(150_000), number(10_000), name(60_000)];
const INSIDE_STRINGS = [`{"s":"${"[".repeat(5_000)}","t":"${"9".repeat(5_000)}","u":"\\"${"{".repeat(600)}"}`, `{"s":"${"\\\\".repeat(3_000)}"}`];

test("texts within the limits pass, one past each is named; brackets and digits inside strings count for nothing", () => {
  expect([...AT, ...INSIDE_STRINGS].map(unportable)).toEqual([...AT, ...INSIDE_STRINGS].map(() => null));
  expect(PAST.map(unportable)).toEqual([
    `nesting deeper than ${depth} levels`,
    `nesting deeper than ${depth} levels`,
    `a number longer than ${numberChars} characters`,
    `a property name longer than ${nameChars} characters`,
  ]);
});

test("what the limits pass, Python's json and Jackson both read; a number or a name one past them is one past Jackson's own; far past, a reader fails", async () => {
  expect(await unreadable([...AT, ...INSIDE_STRINGS])).toEqual([]);
  const past = await jackson(PAST);
  expect(past.map((e) => e.replace(/ \(.*/s, ""))).toEqual([
    "",
    "",
    "StreamConstraintsException: Number value length",
    "StreamConstraintsException: Name length",
  ]);
  const [py, jv] = await Promise.all([pythonJson(FAR_PAST), jackson(FAR_PAST)]);
  FAR_PAST.forEach((t, i) => {
    expect(`#${i}: ${Boolean(py[i] || jv[i])}`).toBe(`#${i}: true`);
    expect(unportable(t)).not.toBeNull();
  });
}, 60_000);

test("an envelope of a payload past the limits carries it as a string, verbatim, and says why; both readers read it", async () => {
  const at = new Date(0);
  const envelopes = FAR_PAST.map((payload) => encodeEnvelopeOf({ reason: "missing_required_field", field: "raw_id", payload, payloadIsObject: true }, at, "w"));
  envelopes.forEach((e, i) => {
    expect(JSON.parse(e.text).original_payload).toBe(FAR_PAST[i]);
    expect(e.asText).toBe(unportable(FAR_PAST[i]!));
  });
  expect(await unreadable(envelopes.map((e) => e.text))).toEqual([]);
  // Within the limits the payload stays an object, spliced verbatim.
  const within = encodeEnvelopeOf({ reason: "missing_required_field", field: "raw_id", payload: AT[2]!, payloadIsObject: true }, at, "w");
  expect([within.asText, within.text.includes(AT[2]!)]).toEqual([null, true]);
}, 60_000);
