/**
 * The stage order, and nothing else:
 *   poll → decode (parse, validate, normalize) → valid? buffer : DLQ → flush (retry → DLQ) → commit
 * Offsets are committed only when everything before them is durable (offsets/tracker.ts).
 * A DLQ or commit failure is fatal: the worker stops without flushing or committing further.
 */
import type { Batch } from "./batch/batch.ts";
import { Batcher } from "./batch/batcher.ts";
import { DlqBreaker } from "./batch/breaker.ts";
import { decode } from "./cdr/decode.ts";
import type { PhoneNormalizer } from "./cdr/phone.ts";
import type { RetryPolicy } from "./clickhouse/retry.ts";
import { storeBatch } from "./clickhouse/store.ts";
import type { ClickHouseWriter } from "./clickhouse/writer.ts";
import type { DlqPublisher, SourceRecord } from "./dlq/publisher.ts";
import type { Consumer } from "./kafka/consumer.ts";
import type { Message } from "./kafka/message.ts";
import { log } from "./log.ts";
import { OffsetTracker } from "./offsets/tracker.ts";
import type { Counters } from "./stats/counters.ts";

export interface WorkerOptions {
  topic: string;
  batchSize: number;
  flushIntervalMs: number;
  concurrency: number;
  retry: RetryPolicy;
  dlqMaxRatio: number;
  dlqRatioWindow: number;
}

export interface WorkerDeps {
  consumer: Consumer;
  writer: ClickHouseWriter;
  dlq: DlqPublisher;
  phone: PhoneNormalizer;
  counters: Counters;
}

export type WorkerState = "starting" | "running" | "tripped" | "draining" | "stopped" | "failed";

/** Longest idle wait between polls of an empty queue (arrivals wake the worker at once). */
const IDLE_WAIT_MS = 20;
/** Most DLQ deliveries awaited at once before polling pauses. */
const MAX_DLQ_IN_FLIGHT = 10_000;
/** Most records handled between two yields to the event loop (~5-10 ms of work), so HTTP stays responsive. */
const MAX_POLL = 300;

export class Worker {
  readonly #o: WorkerOptions;
  readonly #d: WorkerDeps;
  readonly #batcher: Batcher;
  readonly #tracker = new OffsetTracker();
  readonly #breaker: DlqBreaker;
  readonly #pending = new Set<Promise<void>>();
  #dlqInFlight = 0;
  #state: WorkerState = "starting";
  #assigned = false;
  #stopRequested = false;
  #fatal: Error | null = null;
  #committing: Promise<void> | null = null;
  #commitAgain = false;
  #wake: (() => void) | null = null;
  /** False while inserts are failing (retries under way), true after a success or a good ping. */
  clickhouseHealthy = true;

  constructor(opts: WorkerOptions, deps: WorkerDeps) {
    this.#o = opts;
    this.#d = deps;
    this.#batcher = new Batcher(opts.batchSize, opts.concurrency);
    this.#breaker = new DlqBreaker(opts.dlqMaxRatio, opts.dlqRatioWindow);
  }

  get state(): WorkerState {
    return this.#state;
  }

  /** Joined the group and received an assignment (possibly empty). */
  get assigned(): boolean {
    return this.#assigned;
  }

  get bufferedRows(): number {
    return this.#batcher.bufferedRows;
  }

  get breakerRatio(): number {
    return this.#breaker.ratio;
  }

  positions(): Map<number, { committed: number; consumed: number }> {
    return this.#tracker.positions();
  }

  /** Asks for a graceful stop: stop polling, flush, commit, leave the group. */
  stop(): void {
    this.#stopRequested = true;
    this.#wakeUp();
  }

  /** Runs until stopped (resolves) or a fatal error (rejects). */
  async run(): Promise<void> {
    this.#state = "running";
    while (!this.#stopRequested && !this.#fatal) {
      this.#handleRebalance();
      if (this.#d.consumer.pendingRevoke) {
        await this.#releaseRevoked();
        continue;
      }
      if (this.#breaker.tripped) {
        await this.#sleep(200);
        continue;
      }
      this.#flushIfDue();
      const room = this.#batcher.room;
      if (room === 0 || this.#dlqInFlight >= MAX_DLQ_IN_FLIGHT) {
        // Backpressure: nothing is polled until a flush or DLQ delivery settles.
        await this.#sleep(50);
        continue;
      }
      const messages = this.#d.consumer.poll(Math.min(room, MAX_POLL));
      if (messages.length === 0) {
        await this.#idle();
        continue;
      }
      this.#process(messages);
      this.#flushIfDue();
      // Let timers, HTTP and delivery reports run between batches.
      await new Promise<void>((r) => setImmediate(r));
    }
    if (this.#fatal) {
      this.#state = "failed";
      throw this.#fatal;
    }
    this.#state = "draining";
    await this.#drain();
    if (this.#fatal) {
      this.#state = "failed";
      throw this.#fatal;
    }
    this.#d.consumer.close();
    this.#state = "stopped";
  }

  #process(messages: Message[]): void {
    const { counters, phone } = this.#d;
    const ctx = { phone };
    const ingestedAt = Math.floor(Date.now() / 1000);
    counters.consumed += messages.length;
    // A poll's messages come grouped by partition: look the counter up only when it changes.
    let partitionCounters = counters.partition(messages[0]!.partition);
    for (const m of messages) {
      if (m.partition !== partitionCounters.partition) partitionCounters = counters.partition(m.partition);
      partitionCounters.consumed++;
      const result = decode(m.value, ctx);
      if (result.ok) {
        if (this.#batcher.current.full) this.#startFlush(this.#batcher.seal());
        const batch = this.#batcher.current;
        const hold = this.#tracker.track(m.partition, m.offset, batch);
        if (hold) batch.holds.push(hold);
        batch.add(result.row, ingestedAt, result.payload, m.partition, m.offset, m.timestamp);
      } else {
        const token = {};
        const hold = this.#tracker.track(m.partition, m.offset, token)!;
        const rejection = result.rejection;
        this.#dlqInFlight++;
        this.#track(
          this.#d.dlq.publishRejection(rejection, { topic: m.topic, partition: m.partition, offset: m.offset }).then(() => {
            this.#dlqInFlight--;
            hold.done = true;
            counters.addDurable("durableDlq", [m.partition], 1);
            counters.byDlqReason[rejection.reason]++;
            this.#scheduleCommit();
          }),
        );
      }
      if (this.#breaker.record(!result.ok)) {
        this.#state = "tripped";
        log.error("DLQ circuit breaker tripped: consumption stopped; fix the producer or raise DLQ_MAX_RATIO, then restart", { ratio: this.#breaker.ratio, max_ratio: this.#o.dlqMaxRatio });
      }
    }
  }

  #flushIfDue(): void {
    if (this.#batcher.due(this.#o.flushIntervalMs)) this.#startFlush(this.#batcher.seal());
  }

  #startFlush(batch: Batch): void {
    this.#track(this.#flush(batch));
  }

  async #flush(batch: Batch): Promise<void> {
    const { counters, writer, dlq } = this.#d;
    const started = performance.now();
    const outcome = await storeBatch(batch.count, (lo, hi) => writer.insert(batch.rows(lo, hi), hi - lo), this.#o.retry, {
      onRetry: (attempt, error, delayMs) => {
        this.clickhouseHealthy = false;
        counters.chRetries++;
        log.warn("ClickHouse insert failed; retrying", { attempt, delay_ms: delayMs, rows: batch.count, err: error as Error });
      },
    });
    counters.chSplitInserts += outcome.splitInserts;
    const toDlq: Promise<void>[] = [];
    const notInserted: number[] = [];
    for (const { row, error } of outcome.refused) {
      notInserted.push(row);
      log.warn("ClickHouse refused a row; it goes to the DLQ alone", { partition: batch.partitions[row], offset: batch.offsets[row], column: error.column, err: error });
      toDlq.push(dlq.publishRefused(sourceRecord(batch, row), this.#o.topic, error.column, error.message));
    }
    const failed = outcome.failed;
    if (failed) {
      const records: SourceRecord[] = [];
      for (const [lo, hi] of failed.ranges) for (let i = lo; i < hi; i++) { notInserted.push(i); records.push(sourceRecord(batch, i)); }
      this.clickhouseHealthy = false;
      counters.chExhausted++;
      log.error("ClickHouse insert failed; routing the batch's records to the DLQ", { attempts: failed.attempts, rows: records.length, err: failed.error as Error });
      toDlq.push(dlq.publishStorageFailure(records, this.#o.topic, failed.attempts, failed.error));
    }
    if (outcome.inserted > 0) {
      this.clickhouseHealthy = true;
      const seconds = (performance.now() - started) / 1000;
      counters.flushes++;
      counters.flushRows += outcome.inserted;
      counters.lastFlushAt = Date.now();
      counters.lastFlushMs = seconds * 1000;
      counters.flushSeconds.observe(seconds);
      counters.batchRows.observe(outcome.inserted);
      notInserted.sort((a, b) => a - b);
      counters.recordInserted(batch, batch.count, notInserted, Date.now());
    }
    // Offsets move only when both destinations acknowledged (a DLQ failure rejects: fatal).
    await Promise.all(toDlq);
    if (notInserted.length > 0) {
      counters.addDurable("durableDlq", notInserted.map((i) => batch.partitions[i]!), notInserted.length);
      counters.chRefusedRows += outcome.refused.length;
      counters.byDlqReason.normalization_error += outcome.refused.length;
      if (failed) counters.byDlqReason[dlq.storageFailureReason] += notInserted.length - outcome.refused.length;
    }
    for (const h of batch.holds) h.done = true;
    this.#batcher.release(batch);
    this.#scheduleCommit();
  }

  /** Keeps a promise in the pending set; its failure is fatal. */
  #track(p: Promise<void>): void {
    const tracked = p.catch((e) => this.#fail(e)).finally(() => {
      this.#pending.delete(tracked);
      this.#wakeUp();
    });
    this.#pending.add(tracked);
  }

  #scheduleCommit(): void {
    if (this.#fatal) return;
    if (this.#committing) {
      this.#commitAgain = true;
      return;
    }
    this.#committing = this.#commitLoop();
  }

  /** Commits until no position advanced; only one runs at a time (see #scheduleCommit). */
  async #commitLoop(): Promise<void> {
    // Yield first so #committing is assigned before this loop can finish and clear it.
    await Promise.resolve();
    try {
      do {
        this.#commitAgain = false;
        const advanced = this.#tracker.advanced();
        if (advanced.length === 0 || this.#fatal) continue;
        await this.#d.consumer.commit(advanced.map(({ partition, offset }) => ({ topic: this.#o.topic, partition, offset: BigInt(offset) })));
        this.#d.counters.commits++;
        this.#d.counters.lastCommitAt = Date.now();
      } while (this.#commitAgain && !this.#fatal);
    } catch (e) {
      this.#fail(e);
    } finally {
      this.#committing = null;
      this.#wakeUp();
    }
  }

  /** Flushes what is buffered and waits until every record is durable and committed. */
  async #drain(): Promise<void> {
    while (!this.#fatal) {
      if (this.#batcher.current.count > 0 && this.#batcher.inFlight < this.#batcher.concurrency) this.#startFlush(this.#batcher.seal());
      if (this.#pending.size === 0 && this.#batcher.current.count === 0) break;
      await Promise.race([...this.#pending]);
    }
    this.#scheduleCommit();
    while (this.#committing && !this.#fatal) await this.#committing;
  }

  #handleRebalance(): void {
    for (const ev of this.#d.consumer.takeRebalanceEvents()) {
      if (ev.kind === "assign") {
        this.#assigned = true;
        this.#tracker.reset(ev.partitions.map((p) => p.partition));
      }
    }
  }

  /** Commits everything of the revoked partitions before librdkafka gives them away. */
  async #releaseRevoked(): Promise<void> {
    const revoked = this.#d.consumer.pendingRevoke!;
    await this.#drain();
    if (this.#fatal) return;
    this.#tracker.reset(revoked.map((p) => p.partition));
    this.#batcher.touch();
    this.#d.consumer.completeRevoke();
  }

  #fail(e: unknown): void {
    if (this.#fatal) return;
    this.#fatal = e instanceof Error ? e : new Error(String(e));
    log.error("fatal: stopping without flushing or committing further", { err: this.#fatal });
    this.#wakeUp();
  }

  /**
   * After an empty poll: until librdkafka signals that the queue has something (no CPU spent
   * meanwhile), a stop or fatal error, or IDLE_WAIT_MS, which bounds how late a due flush runs.
   */
  async #idle(): Promise<void> {
    // The consumer's wait carries the deadline; #wakeUp only needs a way in (no second timer).
    const woken = new Promise<void>((resolve) => { this.#wake = resolve; });
    await Promise.race([woken, this.#d.consumer.waitForMessages(IDLE_WAIT_MS)]);
    this.#wake = null;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => { this.#wake = null; resolve(); }, ms);
      this.#wake = () => { clearTimeout(t); this.#wake = null; resolve(); };
    });
  }

  #wakeUp(): void {
    this.#wake?.();
  }
}

function sourceRecord(batch: Batch, i: number): SourceRecord {
  return { payload: batch.payloads[i]!, partition: batch.partitions[i]!, offset: batch.offsets[i]! };
}
