/**
 * The bounded buffer: one batch filling plus at most `concurrency` sealed batches being inserted, in a
 * fixed pool of (concurrency + 1) batch slots. A batch is full at `size` rows or at `maxBytes`
 * (body plus payloads). When the filling batch is full and every slot is sealed, `room` is 0
 * and the worker stops polling Kafka: memory stays bounded by bytes whatever the input rate.
 */
import { Batch, type RowSink } from "./batch.ts";

export class Batcher {
  readonly size: number;
  readonly concurrency: number;
  readonly #free: Batch[] = [];
  #current: Batch;
  #sealedRows = 0;
  #lastFlushAt: number;

  /** `newBody` makes each slot's insert body (the row encoder's buffer). */
  constructor(
    size: number,
    concurrency: number,
    newBody: () => RowSink,
    opts: { maxBytes?: number; now?: number } = {},
  ) {
    this.size = size;
    this.concurrency = concurrency;
    const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    for (let i = 0; i < concurrency; i++) this.#free.push(new Batch(size, newBody(), maxBytes));
    this.#current = new Batch(size, newBody(), maxBytes);
    this.#lastFlushAt = opts.now ?? Date.now();
  }

  get current(): Batch {
    return this.#current;
  }

  /** Rows that can still be added before the worker must wait for a flush to finish. */
  get room(): number {
    if (this.#current.full) return this.#free.length > 0 ? this.size : 0;
    return this.size - this.#current.count;
  }

  /** Bytes that can still be added before the worker must wait for a flush (cf. `room`). */
  get bytesRoom(): number {
    const c = this.#current;
    if (c.full) return this.#free.length > 0 ? c.maxBytes : 0;
    return c.maxBytes - c.bytes;
  }

  /** A free slot exists for the filling batch to be sealed into flight. */
  get canSeal(): boolean {
    return this.#free.length > 0;
  }

  /** Sealed batches not yet released: the pool's slots that are not free. */
  get sealed(): number {
    return this.concurrency - this.#free.length;
  }

  /** Rows held in memory: the filling batch and the sealed ones. */
  get bufferedRows(): number {
    return this.#current.count + this.#sealedRows;
  }

  /** Whether the filling batch should be sealed now: full, or non-empty and the interval passed. */
  due(intervalMs: number, now = Date.now()): boolean {
    if (this.#current.count === 0 || this.#free.length === 0) return false;
    return this.#current.full || now - this.#lastFlushAt >= intervalMs;
  }

  /** Takes the filling batch for flushing (requires a free slot) and starts a new one. */
  seal(now = Date.now()): Batch {
    const next = this.#free.pop();
    if (!next) throw new Error("seal() without a free batch slot");
    const sealed = this.#current;
    this.#current = next;
    this.#sealedRows += sealed.count;
    this.#lastFlushAt = now;
    return sealed;
  }

  /** Returns a flushed (or dead-lettered) batch's slot to the pool. */
  release(batch: Batch): void {
    this.#sealedRows -= batch.count;
    batch.reset();
    this.#free.push(batch);
  }

  /** Restarts the interval (e.g. after a flush triggered by a rebalance). */
  touch(now = Date.now()): void {
    this.#lastFlushAt = now;
  }
}
