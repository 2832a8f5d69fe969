/**
 * What one DLQ record costs `dlq fill` to turn into a row, on one core, without Kafka or ClickHouse:
 * the whole row (dlq-table/row.ts dlqRow: the envelope read again, its digest, the MAC checked with
 * a key, the lenient fields, the caps) of the bench envelopes scripts/bench/dlq-fill.ts writes, the
 * row's JSON as the insert sends it, and the caller prefix alone, for an international and a
 * national number, beside libphonenumber's parse it shortcuts. µs each, best of 5.
 * Usage: bun scripts/bench/dlq-row.ts [records=100000]
 */
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";
import { ProvenanceKey } from "../../src/dlq/provenance-mac.ts";
import { callerPrefix } from "../../src/dlq-table/lenient.ts";
import { dlqRow } from "../../src/dlq-table/row.ts";
import type { Message } from "../../src/kafka/message.ts";
import { bestOf5 } from "../lib/best.ts";

const N = Number(process.argv[2] ?? 100_000);
const key = new ProvenanceKey("bench-provenance-key-0123456789abcdef0123", { group: "g", dlqTopic: "d", table: "t.c" });
const utf8 = new TextEncoder();

// Half valid JSON with an invalid rat, half malformed text: as the filler bench writes them.
const payload = (i: number) =>
  i % 2
    ? `{"raw_id":"bench-${i}","device_id":"dev-${i % 97}","caller_num":"+4915112345678","svc":"data","rat":7,` +
      `"epoch_start":1700000000,"epoch_end":1700000120,"up_bytes":1000,"down_bytes":2000,"lac":1234,"ci":5678}`
    : `{"raw_id":"bench-${i}","device_id":"dev-${i % 89}","caller_num":"+447700900123","svc":"voice", oops`;
const messages: Message[] = Array.from({ length: 1000 }, (_, i) => {
  const input = { reason: i % 2 ? "invalid_rat_value" : "malformed_json", field: i % 2 ? "rat" : null, payload: payload(i), payloadIsObject: i % 2 === 1 } as const;
  const source = { topic: "cdr.raw", partition: i % 3, offset: i };
  const text = encodeEnvelope(input, new Date(), "bench-w");
  const headers = envelopeHeaders({ ...source, stage: "decode", detail: "bench" }, text, payload(i), key);
  const value = utf8.encode(text);
  return { topic: "cdr.raw.dlq", partition: 0, offset: i, timestamp: 0, key: null, value, headers: headers.map(([k, v]) => [k, utf8.encode(v)]) } as Message;
});

const best = (fn: (i: number) => unknown) => bestOf5(N, fn);

const parsed = (s: string, region?: "GB") => parsePhoneNumberFromString(s, region)?.countryCallingCode;
const rows = messages.map((m) => dlqRow(m, { storedAt: 1.7e9, key }));
console.log(
  JSON.stringify({
    records: N,
    row_us: { with_key: best((i) => dlqRow(messages[i % 1000]!, { storedAt: 1.7e9, key })), without_key: best((i) => dlqRow(messages[i % 1000]!, { storedAt: 1.7e9 })) },
    row_json_us: best((i) => JSON.stringify(rows[i % 1000])),
    caller_prefix_us: {
      international: best((i) => callerPrefix(`+4915${1_000_000 + (i % 900_000)}`)),
      international_parsed: best((i) => parsed(`+4915${1_000_000 + (i % 900_000)}`)),
      national: best((i) => callerPrefix(`07700${900_000 + (i % 99_999)}`, "GB")),
      national_parsed: best((i) => parsed(`07700${900_000 + (i % 99_999)}`, "GB")),
    },
  }),
);
