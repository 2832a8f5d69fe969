/**
 * The DLQ envelope of message-broker.md: exactly five fields. Provenance (source topic, partition,
 * offset, error detail, attempts) rides in Kafka headers, as Kafka Connect's dead-letter queues do.
 */
import type { FailureReason } from "../cdr/fields.ts";

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
}

export const HEADERS = {
  sourceTopic: "dlq.source.topic",
  sourcePartition: "dlq.source.partition",
  sourceOffset: "dlq.source.offset",
  detail: "dlq.error.detail",
  attempts: "dlq.error.attempts",
} as const;

/**
 * Serializes an envelope. An object payload is spliced in as its original text, which JSON.parse
 * already accepted: re-serializing the parsed value would round integers above 2^53.
 */
export function encodeEnvelope(input: EnvelopeInput, failedAt: Date, workerInstance: string): string {
  const payload = input.payloadIsObject ? input.payload : JSON.stringify(input.payload);
  return `{"original_payload":${payload},"failure_reason":${JSON.stringify(input.reason)},"failed_field":${input.field === null ? "null" : JSON.stringify(input.field)},"failed_at":${JSON.stringify(failedAt.toISOString())},"worker_instance":${JSON.stringify(workerInstance)}}`;
}

export interface Provenance {
  topic: string;
  partition: number;
  offset: number;
  detail: string;
  attempts?: number;
}

export function provenanceHeaders(p: Provenance): Array<[string, string]> {
  const h: Array<[string, string]> = [
    [HEADERS.sourceTopic, p.topic],
    [HEADERS.sourcePartition, String(p.partition)],
    [HEADERS.sourceOffset, String(p.offset)],
    [HEADERS.detail, p.detail.slice(0, 1024)],
  ];
  if (p.attempts !== undefined) h.push([HEADERS.attempts, String(p.attempts)]);
  return h;
}
