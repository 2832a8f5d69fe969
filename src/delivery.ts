/**
 * From hand-over to commit: a sealed batch goes to ClickHouse (flush/flush-batch.ts), an invalid
 * record to the DLQ; each marks its offset holds done when acknowledged and asks for a commit of
 * what is now durable (offsets/). A failure of either is fatal: `onFatal`, and no commit after it.
 */
import type { Batch } from "./batch/batch.ts";
import type { Batcher } from "./batch/batcher.ts";
import type { Rejection } from "./cdr/decode.ts";
import type { RetryPolicy } from "./clickhouse/retry.ts";
import type { ClickHouseWriter } from "./clickhouse/writer.ts";
import type { DlqPublisher } from "./dlq/publisher.ts";
import { flushBatch, type FlushDeps } from "./flush/flush-batch.ts";
import { InFlight } from "./in-flight.ts";
import type { Consumer } from "./kafka/consumer.ts";
import type { Message } from "./kafka/message.ts";
import { commitMetadata } from "./offsets/commit-metadata.ts";
import { CommitScheduler } from "./offsets/commit-scheduler.ts";
import type { Advanced, OffsetTracker } from "./offsets/tracker.ts";
import type { Counters } from "./stats/counters.ts";
import { KafkaError } from "./errors.ts";
import { log } from "./log.ts";

/** Kafka's answers to a commit while the group rebalances (DECISIONS "Commits and rebalances"). */
const REBALANCE_REFUSALS = new Set([
  "REBALANCE_IN_PROGRESS",
  "UNKNOWN_MEMBER_ID",
  "ILLEGAL_GENERATION",
  "STALE_MEMBER_EPOCH",
  "FENCED_MEMBER_EPOCH",
]);
/** Pause before a refused commit is sent again: the rebalance needs the poll loop meanwhile. */
const COMMIT_RETRY_MS = 500;

export interface DeliveryDeps {
  consumer: Consumer;
  writer: ClickHouseWriter;
  dlq: DlqPublisher;
  counters: Counters;
  tracker: OffsetTracker;
  batcher: Batcher;
}

export interface DeliveryEvents {
  onFatal: (e: unknown) => void;
  /** Some hand-over settled: a batch slot, DLQ room or a commit position may have come free. */
  onSettled: () => void;
  /** A batch starts (true) or stops (false) waiting for an unreachable ClickHouse. */
  onWaiting: (waiting: boolean) => void;
}

export class Delivery {
  readonly #topic: string;
  readonly #deps: DeliveryDeps;
  readonly #inFlight: InFlight;
  readonly #commits: CommitScheduler;
  readonly #flushDeps: FlushDeps;
  #dlqInFlight = 0;
  #dlqInFlightBytes = 0;

  constructor(topic: string, retry: RetryPolicy, deps: DeliveryDeps, events: DeliveryEvents) {
    this.#topic = topic;
    this.#deps = deps;
    this.#inFlight = new InFlight(events.onFatal, events.onSettled);
    this.#commits = new CommitScheduler(deps.tracker, (positions) => this.#commit(positions), events.onFatal);
    const { writer, dlq, counters } = deps;
    this.#flushDeps = { writer, dlq, counters, topic, retry, onWaiting: events.onWaiting };
  }

  /** DLQ sends not yet acknowledged. */
  get dlqInFlight(): number {
    return this.#dlqInFlight;
  }

  /** Payload characters of the DLQ sends not yet acknowledged. */
  get dlqInFlightBytes(): number {
    return this.#dlqInFlightBytes;
  }

  /** Hand-overs (flushes and DLQ sends) not yet settled. */
  get pending(): number {
    return this.#inFlight.size;
  }

  /** A sealed batch into ClickHouse; its rows' offsets become committable once it is durable. */
  flush(batch: Batch): void {
    this.#inFlight.add(
      flushBatch(batch, this.#flushDeps).then(() => {
        for (const h of batch.holds) h.done = true;
        // A batch sealed by bytes held records of megabytes each: their poll copies, texts and rows
        // are garbage now. The collector is paced by the heap, not by these buffers outside it, and
        // would let many such batches pile up before reclaiming them: collected now.
        const large = batch.bytes >= batch.maxBytes / 2;
        this.#deps.batcher.release(batch);
        if (large) Bun.gc(true);
        this.#commits.schedule();
      }),
    );
  }

  /** An invalid record to the DLQ; its offset becomes committable once the DLQ acknowledged it. */
  deadLetter(m: Message, rejection: Rejection): void {
    // Fields, not the message: its value is a view into the whole poll's slab, which the pending
    // send would otherwise keep alive until the DLQ acknowledges.
    const { topic, partition, offset } = m;
    const hold = this.#deps.tracker.trackAlone(partition, offset);
    const bytes = rejection.payload.length;
    this.#dlqInFlight++;
    this.#dlqInFlightBytes += bytes;
    this.#inFlight.add(
      this.#deps.dlq.publishRejection(rejection, { topic, partition, offset }).then(() => {
        this.#dlqInFlight--;
        this.#dlqInFlightBytes -= bytes;
        hold.done = true;
        this.#deps.counters.recordRejected(partition, rejection.reason);
        this.#commits.schedule();
      }),
    );
  }

  /** A record the partition's last owner already delivered (the replay check): committable at once. */
  alreadyDelivered(partition: number, offset: number): void {
    this.#deps.tracker.trackAlone(partition, offset).done = true;
    this.#deps.counters.replaysSkipped++;
    this.#commits.schedule();
  }

  /** Resolves when any pending hand-over settles (at once when none is pending). */
  anySettled(): Promise<void> {
    return this.#inFlight.any();
  }

  /** Commits every durable position and waits for it. */
  async commitDurable(): Promise<void> {
    this.#commits.schedule();
    await this.#commits.settled();
  }

  /** No commit after a fatal error: nothing further may be made to look durable. */
  stopCommitting(): void {
    this.#commits.stop();
  }

  /**
   * A commit the group refuses because it is rebalancing (REBALANCE_IN_PROGRESS; after a session or
   * coordinator loss UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION; under KIP-848 STALE_MEMBER_EPOCH or
   * FENCED_MEMBER_EPOCH) advanced nothing and is no commit failure: the partitions may have moved.
   * Its positions are handed out again after COMMIT_RETRY_MS for the partitions still owned; a
   * partition revoked meanwhile is reset on release, so its records replay at the next owner.
   * Every other failure is fatal (the scheduler's onError).
   */
  async #commit(positions: Advanced[]): Promise<void> {
    const { consumer, counters, tracker } = this.#deps;
    try {
      // Each position carries what the partition's next owner needs to skip what was delivered
      // past it (offsets/commit-metadata.ts), whichever delivery mode runs now or next.
      await consumer.commit(
        positions.map(({ partition, offset, since }) => ({
          topic: this.#topic,
          partition,
          offset: BigInt(offset),
          metadata: commitMetadata(since),
        })),
      );
    } catch (e) {
      if (!(e instanceof KafkaError) || !REBALANCE_REFUSALS.has(e.kafkaName ?? "")) throw e;
      counters.commitsRefused++;
      log.warn("commit refused while the group rebalances; sent again for the partitions still owned", {
        code: e.kafkaName,
        partitions: positions.map((p) => p.partition),
      });
      setTimeout(() => {
        tracker.refused(positions);
        this.#commits.schedule();
      }, COMMIT_RETRY_MS).unref();
      return;
    }
    tracker.confirm(positions);
    counters.commits++;
    counters.lastCommitAt = Date.now();
  }
}
