/**
 * Routes records to the DLQ topic: an envelope per record, provenance in headers, and a promise
 * that settles on the broker's acknowledgement. A rejected promise is fatal to the worker.
 */
import type { Rejection } from "../cdr/decode.ts";
import type { FailureReason } from "../cdr/fields.ts";
import type { Batch } from "../batch/batch.ts";
import type { Producer } from "../kafka/producer.ts";
import { encodeEnvelope, isTruncated, provenanceHeaders } from "./envelope.ts";

export interface DlqPublisherOptions {
  topic: string;
  workerInstance: string;
  /** failure_reason for records whose inserts exhausted their retries. */
  storageFailureReason: FailureReason;
}

export class DlqPublisher {
  readonly #producer: Producer;
  readonly #opts: DlqPublisherOptions;

  constructor(producer: Producer, opts: DlqPublisherOptions) {
    this.#producer = producer;
    this.#opts = opts;
  }

  get storageFailureReason(): FailureReason {
    return this.#opts.storageFailureReason;
  }

  /** One invalid record. */
  async publishRejection(r: Rejection, source: { topic: string; partition: number; offset: number }): Promise<void> {
    const value = encodeEnvelope(r, new Date(), this.#opts.workerInstance);
    await this.#producer.produce(this.#opts.topic, value, { headers: provenanceHeaders({ ...source, detail: r.detail, truncated: isTruncated(r.payload) }) });
  }

  /**
   * Every record of a batch whose inserts all failed, with its original vendor payload and
   * failed_field null (processing-worker spec); resolves when all are acknowledged.
   */
  async publishStorageFailure(batch: Batch, sourceTopic: string, attempts: number, error: unknown): Promise<void> {
    const failedAt = new Date();
    const detail = `ClickHouse insert failed after ${attempts} attempts: ${(error as Error)?.message ?? String(error)}`;
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < batch.count; i++) {
      const value = encodeEnvelope({ reason: this.#opts.storageFailureReason, field: null, payload: batch.payloads[i]!, payloadIsObject: true }, failedAt, this.#opts.workerInstance);
      sends.push(this.#producer.produce(this.#opts.topic, value, {
        headers: provenanceHeaders({ topic: sourceTopic, partition: batch.partitions[i]!, offset: batch.offsets[i]!, detail, attempts, truncated: isTruncated(batch.payloads[i]!) }),
      }));
    }
    await Promise.all(sends);
  }
}
