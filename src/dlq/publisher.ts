/**
 * Routes records to the DLQ topic: an envelope per record, provenance in headers, and a promise
 * that settles on the broker's acknowledgement. A rejected promise is fatal to the worker.
 */
import type { Rejection } from "../cdr/decode.ts";
import type { FailureReason } from "../cdr/fields.ts";
import type { ProduceOptions } from "../kafka/producer.ts";
import { encodeEnvelopeOf, HEADERS, provenanceHeaders, type DlqStage, type EnvelopeInput } from "./envelope.ts";
import type { Provenance } from "./envelope.ts";
import { MAC_VERSION, payloadDigest, type ProvenanceKey } from "./provenance-mac.ts";

/** A record of the source topic, as the DLQ needs it. */
export interface SourceRecord {
  /** The original vendor payload (a JSON object's text: the decoder accepted it). */
  payload: string;
  partition: number;
  offset: number;
}

/** Where a record was read: what its envelope's provenance headers name. */
export interface SourceRef {
  topic: string;
  partition: number;
  offset: number;
}

/** An envelope written and not yet sent. */
export interface OutgoingEnvelope {
  value: string;
  headers: Array<[string, string]>;
  /** Its bytes as written (UTF-8, headers included): what it costs while it waits and is sent. */
  bytes: number;
  source: SourceRef;
}

export interface DlqPublisherOptions {
  topic: string;
  workerInstance: string;
  /** failure_reason for records whose inserts exhausted their retries. */
  storageFailureReason: FailureReason;
  /** DLQ_PROVENANCE_KEY: each envelope carries the MAC of its source (provenance-mac.ts). */
  key?: ProvenanceKey;
}

/**
 * What the publisher needs of a producer: one record, settled on the broker's acknowledgement.
 * `source` is the record the envelope stands for (exactly-once's transactions check it against
 * their commit: delivery/offsets/transactional-commits.ts); a plain Producer ignores it.
 */
export interface RecordProducer {
  produce(
    topic: string,
    value: string,
    opts: ProduceOptions,
    source: { partition: number; offset: number },
  ): Promise<unknown>;
}

/**
 * An envelope's headers as the worker writes them: its provenance and, with a key, the digest of
 * the record's payload, the MAC's form and the MAC, which covers the envelope's text (`value`) and
 * every header before it (provenance-mac.ts, form 3).
 */
export function envelopeHeaders(
  provenance: Omit<Provenance, "proof">,
  value: string,
  payload: string,
  key?: ProvenanceKey,
): Array<[string, string]> {
  if (!key) return provenanceHeaders(provenance);
  const digest = payloadDigest(payload);
  const headers = provenanceHeaders({ ...provenance, proof: { digest, version: MAC_VERSION } });
  const { topic, partition, offset } = provenance;
  headers.push([HEADERS.sourceMac, key.signEnvelope(topic, partition, offset, digest, { value, headers })]);
  return headers;
}

export class DlqPublisher {
  readonly #producer: RecordProducer;
  readonly #opts: DlqPublisherOptions;

  constructor(producer: RecordProducer, opts: DlqPublisherOptions) {
    this.#producer = producer;
    this.#opts = opts;
  }

  get storageFailureReason(): FailureReason {
    return this.#opts.storageFailureReason;
  }

  /** One invalid record. */
  publishRejection(r: Rejection, source: SourceRef): Promise<void> {
    return this.publish(this.encodeRejection(r, source));
  }

  /**
   * One invalid record's envelope, written now and sent later (publish): what waits to be sent is
   * the envelope, whose bytes as written are what its wait costs.
   */
  encodeRejection(r: Rejection, source: SourceRef): OutgoingEnvelope {
    return this.#encode(r, source, "decode", r.detail);
  }

  /** Sends an encoded envelope; resolves on the broker's acknowledgement. */
  async publish(e: OutgoingEnvelope): Promise<void> {
    await this.#producer.produce(this.#opts.topic, e.value, { headers: e.headers }, e.source);
  }

  #encode(
    input: EnvelopeInput,
    source: SourceRef,
    stage: DlqStage,
    detail: string,
    attempts?: number,
  ): OutgoingEnvelope {
    const { text, truncated, asText } = encodeEnvelopeOf(input, new Date(), this.#opts.workerInstance);
    const provenance = { ...source, stage, detail, attempts, truncated, asText };
    const headers = envelopeHeaders(provenance, text, input.payload, this.#opts.key);
    let bytes = Buffer.byteLength(text);
    for (const [k, v] of headers) bytes += Buffer.byteLength(k) + Buffer.byteLength(v);
    return { value: text, headers, bytes, source };
  }

  /**
   * Records whose inserts all failed, each with its original vendor payload and failed_field null
   * (docs/internals.md); resolves when all are acknowledged.
   */
  async publishStorageFailure(
    records: readonly SourceRecord[],
    sourceTopic: string,
    attempts: number,
    error: unknown,
  ): Promise<void> {
    const detail = `ClickHouse insert failed after ${attempts} attempts: ${(error as Error)?.message ?? String(error)}`;
    await Promise.all(
      records.map((r) =>
        this.#publishStored(r, sourceTopic, "clickhouse-failed", this.#opts.storageFailureReason, null, detail, {
          attempts,
        }),
      ),
    );
  }

  /**
   * A record ClickHouse refused on its own (the rest of its batch was inserted):
   * normalization_error, the column ClickHouse named as failed_field, its message as the detail.
   */
  publishRefused(record: SourceRecord, sourceTopic: string, column: string | null, detail: string): Promise<void> {
    return this.#publishStored(
      record,
      sourceTopic,
      "clickhouse-refused",
      "normalization_error",
      column,
      `ClickHouse refused the row: ${detail}`,
    );
  }

  #publishStored(
    r: SourceRecord,
    topic: string,
    stage: DlqStage,
    reason: FailureReason,
    field: string | null,
    detail: string,
    { attempts }: { attempts?: number } = {},
  ): Promise<void> {
    const input = { reason, field, payload: r.payload, payloadIsObject: true };
    const source = { topic, partition: r.partition, offset: r.offset };
    return this.publish(this.#encode(input, source, stage, detail, attempts));
  }
}
