/**
 * The bounded buffer: one batch filling plus at most `concurrency` sealed batches being inserted, in a
 * fixed pool of (concurrency + 1) batch slots. A batch is due at `size` rows (BATCH_SIZE) and sealed
 * as soon as a slot is free. While every slot is taken (a backlog: ClickHouse takes inserts slower
 * than they come), the filling batch goes on growing up to `backlogRows`, so that the next insert
 * carries what piled up instead of the worker waiting idle: fewer, larger inserts exactly when
 * ClickHouse is the bottleneck, and nothing changes at low rates. A batch is full at `backlogRows`
 * rows or at `maxBytes` (body plus payloads); when the filling batch is full and every slot is
 * sealed, `room` is 0 and the worker stops polling Kafka: memory stays bounded whatever the rate.
 */
import { Batch, type RowSink } from "./batch.ts";

export class Batcher {
  readonly size: number;
  readonly backlogRows: number;
  readonly concurrency: number;
  readonly #free: Batch[] = [];
  #current: Batch;
  #sealedRows = 0;
  #lastFlushAt: number;
  /** Milliseconds for the flush interval (Delivery gives the monotonic clock; Date.now by default). */
  readonly #clock: () => number;

  /** `newBody` makes each slot's insert body (the row encoder's buffer). */
  constructor(
    size: number,
    concurrency: number,
    newBody: () => RowSink,
    opts: { maxBytes?: number; now?: number; backlogRows?: number; clock?: () => number } = {},
  ) {
    this.size = size;
    this.backlogRows = Math.max(size, opts.backlogRows ?? size);
    this.concurrency = concurrency;
    const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    for (let i = 0; i < concurrency; i++) this.#free.push(new Batch(this.backlogRows, newBody(), maxBytes));
    this.#current = new Batch(this.backlogRows, newBody(), maxBytes);
    this.#clock = opts.clock ?? Date.now;
    this.#lastFlushAt = opts.now ?? this.#clock();
  }

  get current(): Batch {
    return this.#current;
  }

  /**
   * Rows a poll may take now. With a free slot, up to BATCH_SIZE (a batch at it is sealed first);
   * with none, what the filling batch can still grow by; 0 when it is full too.
   */
  get room(): number {
    const c = this.#current;
    if (this.#free.length > 0) return c.count >= this.size || c.full ? this.size : this.size - c.count;
    return c.full ? 0 : this.backlogRows - c.count;
  }

  /** The filling batch is due by size (BATCH_SIZE, or full by bytes) and a slot is free to seal it into. */
  get sealable(): boolean {
    return this.#free.length > 0 && (this.#current.full || this.#current.count >= this.size);
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

  /** Whether the filling batch should be sealed now: at BATCH_SIZE, full, or non-empty and the interval passed. */
  due(intervalMs: number, now = this.#clock()): boolean {
    if (this.#current.count === 0 || this.#free.length === 0) return false;
    return this.sealable || now - this.#lastFlushAt >= intervalMs;
  }

  /** Takes the filling batch for flushing (requires a free slot) and starts a new one. */
  seal(now = this.#clock()): Batch {
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

  /** Empties the filling batch, dropping its rows (their partitions were lost). */
  discard(): void {
    this.#current.reset();
  }

  /** Restarts the interval (e.g. after a flush triggered by a rebalance). */
  touch(now = this.#clock()): void {
    this.#lastFlushAt = now;
  }
}
