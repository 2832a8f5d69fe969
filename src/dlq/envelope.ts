/**
 * The DLQ envelope (docs/internals.md "DLQ envelope"): exactly five fields. Provenance (source topic, partition,
 * offset, error detail, attempts) rides in Kafka headers, as Kafka Connect's dead-letter queues do.
 */
import { MAX_PAYLOAD_CHARS, type FailureReason } from "../cdr/fields.ts";
import { headerTexts } from "./header-text.ts";
import { unportable } from "./portable-json.ts";

export interface DlqEnvelope {
  /** The vendor record as an object when it was a JSON object, else the raw text. */
  original_payload: Record<string, unknown> | string;
  failure_reason: FailureReason;
  failed_field: string | null;
  /** ISO 8601 UTC. */
  failed_at: string;
  worker_instance: string;
}

export interface EnvelopeInput {
  reason: FailureReason;
  field: string | null;
  payload: string;
  payloadIsObject: boolean;
  /**
   * The record's size in bytes where `payload` holds only its first bytes (a record over
   * RECORD_MAX_BYTES, never read whole): it travels marked truncated, as a longer one would.
   */
  wholeBytes?: number;
}

export const HEADERS = {
  truncated: "dlq.payload.truncated",
  /** Why an object payload travels as a string: past what common JSON readers take (portable-json.ts). */
  asText: "dlq.payload.as_text",
  sourceTopic: "dlq.source.topic",
  sourcePartition: "dlq.source.partition",
  sourceOffset: "dlq.source.offset",
  detail: "dlq.error.detail",
  attempts: "dlq.error.attempts",
  stage: "dlq.error.stage",
  /** The payload's SHA-256 and the worker's MAC of the source (provenance-mac.ts), with a key set. */
  sourceDigest: "dlq.source.sha256",
  sourceMac: "dlq.source.mac",
  /** The MAC's form (provenance-mac.ts MAC_VERSION); absent on envelopes of the first form. */
  macVersion: "dlq.source.mac.version",
} as const;

/** A source record as an envelope's headers name it, with its digest and MAC where they are there. */
export interface EnvelopeSource {
  topic: string;
  partition: number;
  offset: number;
  digest?: string;
  mac?: string;
  macVersion?: string;
}

/**
 * The raw record an envelope stands for, from its headers (as text, or as a message's raw header
 * bytes: an envelope whose body is not JSON still names its source); null without them.
 */
export function envelopeSource(
  headers: Record<string, string> | ReadonlyArray<readonly [string, Uint8Array]> | undefined,
): EnvelopeSource | null {
  const h = Array.isArray(headers)
    ? headerTexts(headers)
    : ((headers ?? {}) as Record<string, string>);
  const topic = h[HEADERS.sourceTopic];
  const partition = Number(h[HEADERS.sourcePartition]);
  const offset = Number(h[HEADERS.sourceOffset]);
  if (topic === undefined || !Number.isInteger(partition) || !Number.isInteger(offset)) return null;
  const src: EnvelopeSource = { topic, partition, offset };
  // Set only where present (a spread per field was a share of the DLQ filler's CPU an envelope).
  const [digest, mac, macVersion] = [h[HEADERS.sourceDigest], h[HEADERS.sourceMac], h[HEADERS.macVersion]];
  if (digest !== undefined) src.digest = digest;
  if (mac !== undefined) src.mac = mac;
  if (macVersion !== undefined) src.macVersion = macVersion;
  return src;
}

/**
 * Where a record was turned away, in the `dlq.error.stage` header: the decoder's rules, ClickHouse
 * refusing the row alone, or ClickHouse failing the whole batch past its retries. Under the spec's
 * default reason the last two are both `normalization_error`; the header tells them apart.
 */
export type DlqStage = "decode" | "clickhouse-refused" | "clickhouse-failed";
export const DLQ_STAGES: readonly DlqStage[] = ["decode", "clickhouse-refused", "clickhouse-failed"];

/** Re-exported: the envelope caps its payload at the raw record's largest (cdr/fields.ts). */
export { MAX_PAYLOAD_CHARS };

/** What every envelope starts with: the payload comes first, so readers can cut it out verbatim. */
export const ENVELOPE_HEAD = '{"original_payload":';

/** The four small fields after the payload, exactly as encodeEnvelope writes them. */
export function envelopeTail(reason: string, field: string | null, failedAt: string, workerInstance: string): string {
  const failedField = field === null ? "null" : JSON.stringify(field);
  return (
    `,"failure_reason":${JSON.stringify(reason)},"failed_field":${failedField}` +
    `,"failed_at":${JSON.stringify(failedAt)},"worker_instance":${JSON.stringify(workerInstance)}}`
  );
}

/** An envelope as written, and how its payload travels. */
export interface EncodedEnvelope {
  text: string;
  /** The payload was cut at MAX_PAYLOAD_CHARS (dlq.payload.truncated). */
  truncated: boolean;
  /** Why an object payload travels as a string instead (dlq.payload.as_text); null when it does not. */
  asText: string | null;
}

/**
 * Serializes an envelope. An object payload is spliced in as its original text, which JSON.parse
 * already accepted: re-serializing the parsed value would round integers above 2^53. One that
 * common JSON readers refuse (too deep, a number too long: portable-json.ts) travels as a string,
 * so the DLQ's consumers can read every envelope. A payload above MAX_PAYLOAD_CHARS travels as a
 * truncated string (see isTruncated); the source offset in the headers still points at the whole
 * record.
 */
export function encodeEnvelope(input: EnvelopeInput, failedAt: Date, workerInstance: string): string {
  return encodeEnvelopeOf(input, failedAt, workerInstance).text;
}

export function encodeEnvelopeOf(input: EnvelopeInput, failedAt: Date, workerInstance: string): EncodedEnvelope {
  const cut = input.wholeBytes !== undefined;
  const truncated = cut || isTruncated(input.payload);
  const asText = !truncated && input.payloadIsObject ? unportable(input.payload) : null;
  const whole = cut ? `${input.wholeBytes} bytes` : `${input.payload.length} characters`;
  const payload = truncated
    ? JSON.stringify(input.payload.slice(0, MAX_PAYLOAD_CHARS) + `…[truncated: ${whole} in all]`)
    : input.payloadIsObject && asText === null
      ? input.payload
      : JSON.stringify(input.payload);
  const tail = envelopeTail(input.reason, input.field, failedAt.toISOString(), workerInstance);
  return { text: `${ENVELOPE_HEAD}${payload}${tail}`, truncated, asText };
}

export function isTruncated(payload: string): boolean {
  return payload.length > MAX_PAYLOAD_CHARS;
}

export interface Provenance {
  topic: string;
  partition: number;
  offset: number;
  stage: DlqStage;
  detail: string;
  attempts?: number;
  truncated?: boolean;
  /** Why an object payload travels as a string (EncodedEnvelope.asText). */
  asText?: string | null;
  /**
   * With a provenance key: the payload's SHA-256 and the MAC's form (provenance-mac.ts). The MAC
   * itself, where given; the publisher adds it last, as it covers the headers before it.
   */
  proof?: { digest: string; version: string; mac?: string };
}

export function provenanceHeaders(p: Provenance): Array<[string, string]> {
  const h: Array<[string, string]> = [
    [HEADERS.sourceTopic, p.topic],
    [HEADERS.sourcePartition, String(p.partition)],
    [HEADERS.sourceOffset, String(p.offset)],
    [HEADERS.stage, p.stage],
    // Well-formed: a cut inside a surrogate pair would travel as U+FFFD, and the MAC covers the bytes sent.
    [HEADERS.detail, p.detail.slice(0, 1024).toWellFormed()],
  ];
  if (p.attempts !== undefined) h.push([HEADERS.attempts, String(p.attempts)]);
  if (p.truncated) h.push([HEADERS.truncated, "true"]);
  if (p.asText) h.push([HEADERS.asText, p.asText]);
  if (p.proof) {
    h.push([HEADERS.sourceDigest, p.proof.digest], [HEADERS.macVersion, p.proof.version]);
    if (p.proof.mac !== undefined) h.push([HEADERS.sourceMac, p.proof.mac]);
  }
  return h;
}
