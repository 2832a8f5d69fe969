/**
 * The stage order, and nothing else:
 *   poll → decode (parse, validate, normalize) → valid? buffer : DLQ → flush (store → DLQ) → commit
 * What follows a hand-over (acknowledgements, durable offsets, commits) is delivery.ts: offsets are
 * committed only when everything before them is durable (offsets/tracker.ts). A DLQ or commit
 * failure is fatal: the worker stops without flushing or committing further.
 */
import { Batcher } from "./batch/batcher.ts";
import { DlqBreaker } from "./batch/breaker.ts";
import { decode, undecodable } from "./cdr/decode.ts";
import type { PhoneNormalizer } from "./cdr/phone.ts";
import type { RetryPolicy } from "./clickhouse/retry.ts";
import { RowBinaryBuffer } from "./clickhouse/row-binary.ts";
import type { ClickHouseWriter } from "./clickhouse/writer.ts";
import { Delivery } from "./delivery.ts";
import type { DlqPublisher } from "./dlq/publisher.ts";
import type { Consumer } from "./kafka/consumer.ts";
import type { Message } from "./kafka/message.ts";
import { CdrWorkerError } from "./errors.ts";
import { log } from "./log.ts";
import type { TopicPartition } from "./kafka/partition-list.ts";
import { OffsetTracker } from "./offsets/tracker.ts";
import type { Counters } from "./stats/counters.ts";
import { Waker } from "./wake.ts";

export interface WorkerOptions {
  topic: string;
  batchSize: number;
  /** Bytes of body plus payloads at which a batch seals (BATCH_MAX_BYTES); default 16 MiB. */
  batchMaxBytes?: number;
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
  /** Exactly-once (DELIVERY): what the last owners of newly assigned partitions delivered (offsets/replay-check.ts). */
  replays?: { findDelivered(partitions: number[]): Promise<Map<number, Set<number>>> };
}

export type WorkerState = "starting" | "running" | "tripped" | "draining" | "stopped" | "failed";

/** Longest idle wait between polls of an empty queue (arrivals wake the worker at once). */
const IDLE_WAIT_MS = 20;
/** Most DLQ deliveries awaited at once before polling pauses. */
const MAX_DLQ_IN_FLIGHT = 10_000;
/** Most bytes of DLQ payloads awaited at once before polling pauses. */
const MAX_DLQ_IN_FLIGHT_BYTES = 32 << 20;
/** First and longest pause before a failed replay check is tried again (its partitions stay paused). */
const REPLAY_CHECK_RETRY_MS = [500, 30_000] as const;
/** Most records handled between two yields to the event loop (~5-10 ms of work), so HTTP stays responsive. */
const MAX_POLL = 300;

export class Worker {
  readonly #opts: WorkerOptions;
  readonly #deps: WorkerDeps;
  readonly #batcher: Batcher;
  readonly #tracker = new OffsetTracker();
  readonly #delivery: Delivery;
  readonly #breaker: DlqBreaker;
  readonly #waker = new Waker();
  #state: WorkerState = "starting";
  #assigned = false;
  #stopRequested = false;
  #fatal: Error | null = null;
  /** Batches waiting for an unreachable ClickHouse (CH_UNREACHABLE_POLICY=wait): consumption is paused while > 0. */
  #waitingBatches = 0;
  /**
   * Recent bytes a record holds in a batch (row plus payload: twice its size), for #pollMax. It
   * starts at what the largest record the raw topic admits (1 MiB) holds, so the first poll cannot
   * take hundreds of them.
   */
  #recordBytes = 2 << 20;
  /** Partitions paused until their replay check answers, with the check's generation. */
  readonly #checking = new Map<number, number>();
  #checks = 0;
  /** Offsets the last owner delivered, per partition, skipped when read again; gone past `max`. */
  readonly #delivered = new Map<number, { offsets: Set<number>; max: number }>();

  constructor(opts: WorkerOptions, deps: WorkerDeps) {
    this.#opts = opts;
    this.#deps = deps;
    this.#batcher = new Batcher(opts.batchSize, opts.concurrency, () => new RowBinaryBuffer(), {
      maxBytes: opts.batchMaxBytes ?? 16 << 20,
    });
    this.#breaker = new DlqBreaker(opts.dlqMaxRatio, opts.dlqRatioWindow);
    this.#delivery = new Delivery(
      opts.topic,
      opts.retry,
      { ...deps, tracker: this.#tracker, batcher: this.#batcher },
      {
        onFatal: (e) => this.#fail(e),
        onSettled: () => this.#waker.wake(),
        onWaiting: (waiting) => this.#onWaiting(waiting),
      },
    );
  }

  // Read-only views for stats and readiness. `assigned`: joined the group and got an assignment
  // (possibly empty). ClickHouse's health is the writer's (ClickHouseWriter.health).
  get state(): WorkerState { return this.#state; } // prettier-ignore
  get assigned(): boolean { return this.#assigned; } // prettier-ignore
  get bufferedRows(): number { return this.#batcher.bufferedRows; } // prettier-ignore
  get breakerRatio(): number { return this.#breaker.ratio; } // prettier-ignore
  /** Partitions waiting for their replay check (exactly-once). */
  get replayChecksPending(): number { return this.#checking.size; } // prettier-ignore
  positions(): Map<number, { committed: number; consumed: number }> {
    return this.#tracker.positions();
  }

  /** Asks for a graceful stop: stop polling, flush, commit, leave the group. */
  stop(): void {
    this.#stopRequested = true;
    this.#waker.wake();
  }

  /** Runs until stopped (resolves) or a fatal error (rejects). */
  async run(): Promise<void> {
    const { consumer } = this.#deps;
    this.#state = "running";
    while (!this.#stopRequested && !this.#fatal) {
      this.#takeAssignments();
      if (consumer.pendingRevoke) {
        await this.#releaseRevoked();
      } else if (
        this.#batcher.room === 0 ||
        this.#delivery.dlqInFlight >= MAX_DLQ_IN_FLIGHT ||
        this.#delivery.dlqInFlightBytes >= MAX_DLQ_IN_FLIGHT_BYTES
      ) {
        this.#flushIfDue();
        await this.#waker.sleep(50); // backpressure: poll nothing until a flush or DLQ delivery settles
      } else {
        this.#flushIfDue();
        const messages = consumer.poll(this.#pollMax());
        if (messages.length === 0) {
          await this.#waker.race(consumer.waitForMessages(IDLE_WAIT_MS));
          continue;
        }
        this.#process(messages);
        this.#flushIfDue();
        await new Promise<void>((r) => setImmediate(r)); // timers, HTTP and delivery reports between polls
      }
    }
    if (!this.#fatal) {
      this.#state = "draining";
      await this.#settle();
    }
    if (this.#fatal) {
      this.#state = "failed";
      throw this.#fatal;
    }
    await consumer.close();
    this.#state = "stopped";
  }

  #process(messages: Message[]): void {
    const { counters, phone } = this.#deps;
    const ctx = { phone };
    const ingestedAt = Math.floor(Date.now() / 1000);
    counters.consumed += messages.length;
    let bytes = 0;
    for (const m of messages) bytes += m.value?.length ?? 0;
    // Twice the record's bytes: its encoded row and its payload string are both held. Up at once
    // when records grow, down by half a poll when they shrink.
    this.#recordBytes = Math.max(64, (2 * bytes) / messages.length, this.#recordBytes / 2);
    // A poll's messages come grouped by partition: look the counter up only when it changes.
    let partitionCounters = counters.partition(messages[0]!.partition);
    for (const m of messages) {
      if (this.#delivered.size > 0 && this.#skipDelivered(m)) {
        counters.consumed--; // the last owner's: counted by replays_skipped, never in flight here
        continue;
      }
      if (m.partition !== partitionCounters.partition) partitionCounters = counters.partition(m.partition);
      partitionCounters.consumed++;
      const result = m.error === undefined ? decode(m.value, ctx) : undecodable(m.error);
      if (result.ok) {
        // A batch full by bytes with no free slot takes the rest of this poll (at most the 4 MiB
        // prefetch queue, README "Memory"); the loop polls nothing more until a slot frees.
        if (this.#batcher.current.full && this.#batcher.canSeal) this.#delivery.flush(this.#batcher.seal());
        const batch = this.#batcher.current;
        const hold = this.#tracker.track(m.partition, m.offset, batch);
        if (hold) batch.holds.push(hold);
        batch.add(result.row, ingestedAt, result.payload, m.partition, m.offset, m.timestamp);
      } else {
        this.#delivery.deadLetter(m, result.rejection);
      }
      if (this.#breaker.record(!result.ok)) {
        this.#state = "tripped";
        // Paused, not stopped: the loop goes on polling (the group keeps the member), flushing and
        // committing what was consumed before the trip.
        this.#deps.consumer.pause(this.#deps.consumer.assignment);
        log.error(
          "DLQ circuit breaker tripped: consumption paused; fix the producer or raise DLQ_MAX_RATIO, then restart",
          { ratio: this.#breaker.ratio, max_ratio: this.#opts.dlqMaxRatio },
        );
      }
    }
  }

  /** A record the partition's last owner already stored or dead-lettered: durable at once, sent nowhere. */
  #skipDelivered(m: Message): boolean {
    const d = this.#delivered.get(m.partition);
    if (!d) return false;
    if (m.offset > d.max) {
      this.#delivered.delete(m.partition); // past everything found: records gone meanwhile (retention) left it
      return false;
    }
    if (!d.offsets.delete(m.offset)) return false;
    if (d.offsets.size === 0) this.#delivered.delete(m.partition);
    this.#delivery.alreadyDelivered(m.partition, m.offset);
    return true;
  }

  /**
   * How many records to take from the consumer: the rows that fit, and the records of the recent
   * average size that fit in the bytes left. librdkafka's queue can hold far more than its
   * prefetch bound (one fetch response may be 50 MiB), so a poll of BATCH_SIZE large records could
   * otherwise overshoot BATCH_MAX_BYTES many times over while no batch slot is free.
   */
  #pollMax(): number {
    const rows = Math.min(this.#batcher.room, MAX_POLL);
    const bySize = Math.floor(this.#batcher.bytesRoom / this.#recordBytes);
    return Math.max(1, Math.min(rows, bySize));
  }

  #flushIfDue(): void {
    if (this.#batcher.due(this.#opts.flushIntervalMs)) this.#delivery.flush(this.#batcher.seal());
  }

  /** Flushes what is buffered and waits until every record is durable and committed. */
  async #settle(): Promise<void> {
    while (!this.#fatal) {
      if (this.#batcher.current.count > 0 && this.#batcher.inFlight < this.#batcher.concurrency)
        this.#delivery.flush(this.#batcher.seal());
      if (this.#delivery.pending === 0 && this.#batcher.current.count === 0) break;
      await this.#delivery.anySettled();
    }
    await this.#delivery.commitDurable();
  }

  #takeAssignments(): void {
    for (const partitions of this.#deps.consumer.takeAssigned()) {
      this.#assigned = true;
      this.#tracker.reset(partitions.map((p) => p.partition));
      if (this.#breaker.tripped || this.#waitingBatches > 0) this.#deps.consumer.pause(partitions);
      if (this.#deps.replays && partitions.length > 0) this.#checkReplays(partitions);
    }
  }

  /**
   * Exactly-once: newly assigned partitions stay paused until the replay check says which of their
   * records the last owner delivered past its commit; the other partitions flow meanwhile. A check
   * that fails (ClickHouse or Kafka not answering) is tried again with backoff; one whose
   * partitions were revoked meanwhile is dropped (its generation no longer matches).
   */
  #checkReplays(tps: readonly TopicPartition[]): void {
    const { consumer, counters } = this.#deps;
    consumer.pause(tps);
    const gen = ++this.#checks;
    const partitions = tps.map((t) => t.partition);
    for (const p of partitions) this.#checking.set(p, gen);
    const attempt = async (n: number): Promise<void> => {
      const mine = () => partitions.filter((p) => this.#checking.get(p) === gen);
      if (mine().length === 0 || this.#stopRequested || this.#fatal) return;
      const started = performance.now();
      let found: Map<number, Set<number>>;
      try {
        found = await this.#deps.replays!.findDelivered(mine());
      } catch (e) {
        // A refusal no retry gets past (a topic gone, a grant missing) stops the worker, as at start.
        if (e instanceof CdrWorkerError && !e.retryable) return this.#fail(e);
        const delay = Math.min(REPLAY_CHECK_RETRY_MS[1], REPLAY_CHECK_RETRY_MS[0] * 2 ** n);
        counters.replayCheckFailures++;
        log.warn("replay check failed; its partitions stay paused and it is tried again", {
          partitions: mine(),
          attempt: n + 1,
          delay_ms: delay,
          err: e as Error,
        });
        setTimeout(() => void attempt(n + 1), delay);
        return;
      }
      const ready = mine();
      let delivered = 0;
      for (const p of ready) {
        this.#checking.delete(p);
        const offsets = found.get(p);
        if (!offsets || offsets.size === 0) continue;
        let max = -1;
        for (const o of offsets) if (o > max) max = o;
        this.#delivered.set(p, { offsets, max });
        delivered += offsets.size;
      }
      counters.replayChecks++;
      log.info("replay check done: what the last owner delivered past its commit is skipped", {
        partitions: ready,
        delivered,
        ms: Math.round(performance.now() - started),
      });
      if (!this.#breaker.tripped && this.#waitingBatches === 0)
        consumer.resume(tps.filter((t) => ready.includes(t.partition)));
      this.#waker.wake();
    };
    void attempt(0);
  }

  /** Commits everything of the revoked partitions before librdkafka gives them away. */
  async #releaseRevoked(): Promise<void> {
    const revoked = this.#deps.consumer.pendingRevoke!;
    await this.#settle();
    if (this.#fatal) return;
    this.#tracker.reset(revoked.map((p) => p.partition));
    for (const { partition } of revoked) {
      this.#checking.delete(partition);
      this.#delivered.delete(partition);
    }
    this.#batcher.touch();
    this.#deps.consumer.completeRevoke();
  }

  /**
   * No ClickHouse endpoint answers and the policy is to wait: the assignment is paused, so records
   * wait in Kafka rather than fill memory or the DLQ, and the loop goes on polling (the group keeps
   * the member) and committing. Resumed once no batch waits, unless the breaker has tripped.
   */
  #onWaiting(waiting: boolean): void {
    const { consumer } = this.#deps;
    this.#waitingBatches += waiting ? 1 : -1;
    if (waiting && this.#waitingBatches === 1) {
      consumer.pause(consumer.assignment);
      log.warn("no ClickHouse endpoint answers; consumption paused until one does (CH_UNREACHABLE_POLICY=wait)");
    } else if (!waiting && this.#waitingBatches === 0 && !this.#breaker.tripped) {
      consumer.resume(consumer.assignment.filter((t) => !this.#checking.has(t.partition)));
      log.info("ClickHouse answers again; consumption resumed");
    }
  }

  #fail(e: unknown): void {
    if (this.#fatal) return;
    this.#fatal = e instanceof Error ? e : new Error(String(e));
    this.#delivery.stopCommitting();
    log.error("fatal: stopping without flushing or committing further", { err: this.#fatal });
    this.#waker.wake();
  }
}
