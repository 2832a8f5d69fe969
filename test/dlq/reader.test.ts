// The DLQ reader hands over only envelopes of the exact shape; anything else is named, never thrown.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { readEnvelope } from "../../src/dlq/reader.ts";
import type { Message } from "../../src/kafka/message.ts";

setDefaultTimeout(60_000);

const message = (text: string | null): Message => ({
  topic: "cdr.raw.dlq", partition: 0, offset: 9, timestamp: -1, key: null, headers: [],
  value: text === null ? null : new TextEncoder().encode(text),
});

test("records that are not envelopes are named, not thrown, not handed over", () => {
  const deep = "[".repeat(50_000) + "]".repeat(50_000);
  const cases: Array<[string | null, string]> = [
    [null, "not JSON"],
    ["{}", "original_payload is neither an object nor a string"],
    ["null", "not a JSON object"],
    ['"text"', "not a JSON object"],
    ["[1]", "not a JSON object"],
    ['{"original_payload":[1],"failure_reason":"malformed_json"}', "original_payload is neither an object nor a string"],
    ['{"original_payload":"x","failure_reason":"__proto__"}', "failure_reason is not a known reason"],
    ['{"original_payload":"x","failure_reason":"malformed_json","failed_field":1}', "failed_field is neither a string nor null"],
    ['{"original_payload":"x","failure_reason":"malformed_json","failed_field":null,"failed_at":1}', "failed_at is not a string"],
    ['{"original_payload":"x","failure_reason":"malformed_json","failed_field":null,"failed_at":"t"}', "worker_instance is not a string"],
    [`{"failure_reason":"malformed_json","failed_field":null,"failed_at":"t","worker_instance":"w","original_payload":{"x":${deep}}}`,
      "original_payload nests too deep to be written out again"],
  ];
  for (const [text, problem] of cases) expect(readEnvelope(message(text))).toBe(problem);
});

test("an envelope as the worker writes it is handed over with its payload verbatim", () => {
  const payload = '{"raw_id":"x","up_bytes":18446744073709551615}';
  const raw = encodeEnvelope({ reason: "normalization_error", field: "__proto__", payload, payloadIsObject: true }, new Date(0), "w");
  const e = readEnvelope(message(raw));
  expect(typeof e).toBe("object");
  if (typeof e === "object") {
    expect(e.payloadText).toBe(payload);
    expect(e.envelope.failed_field).toBe("__proto__");
  }
});
