/**
 * Everything after the hand-over, owned here: a decoded record becomes a row in the filling batch
 * (batch/), a rejection a DLQ send, a record the partition's last owner delivered nothing at all
 * (replays.ts). Each record gets its offset hold here (offsets/tracker.ts), and the hold is marked
 * done here when its destination acknowledged; a sealed batch goes through the flush stage
 * (flush/flush-batch.ts) and what is durable is committed (offsets/). A DLQ or commit failure is
 * fatal: `onFatal`, and nothing is committed after it. The DLQ breaker (breaker.ts), ClickHouse
 * waits, replay checks, revocations and a possible freeze (lease.ts) pause consumption through one
 * gate (gate.ts). Partitions the group took away are dropped, not flushed (`abandon`).
 */
import { undecodable, type Rejection, type Verdict } from "../cdr/decode.ts";
import { systemClock, type Clock } from "../time/clock.ts";
import { ScannedRow } from "../cdr/record-scan.ts";
import type { RetryPolicy } from "../clickhouse/retry.ts";
import { RowBinaryBuffer } from "../clickhouse/row-binary.ts";
import type { ClickHouseWriter } from "../clickhouse/writer.ts";
import type { DlqPublisher } from "../dlq/publisher.ts";
import { AssignmentLostError, CdrWorkerError, KafkaError } from "../errors.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import { REBALANCE_REFUSALS } from "../kafka/handle.ts";
import type { Standing } from "../kafka/heartbeat-proof.ts";
import type { Message } from "../kafka/message.ts";
import type { TopicPartition } from "../kafka/partition-list.ts";
import { log } from "../log.ts";
import type { Counters, PartitionCounters } from "../stats/counters.ts";
import type { Batch } from "./batch/batch.ts";
import { Batcher } from "./batch/batcher.ts";
import { DlqBreaker } from "./breaker.ts";
import { flushBatch, type FlushDeps } from "./flush/flush-batch.ts";
import { Gate } from "./gate.ts";
import { Lease } from "./lease.ts";
import { MembershipLease } from "../kafka/membership.ts";
import { Pending } from "./pending.ts";
import { commitMetadata } from "./offsets/commit-metadata.ts";
import { CommitScheduler } from "./offsets/commit-scheduler.ts";
import { Gaps } from "./offsets/gaps.ts";
import { OffsetTracker, type Advanced, type Hold } from "./offsets/tracker.ts";
import { PassOver } from "./offsets/pass-over.ts";
import type { GroupToken, TransactionalCommits } from "./offsets/transactional-commits.ts";
import { Replays, type ReplayFinder } from "./replays.ts";

/**
 * The least time between two transactions' starts (offsets/commit-scheduler.ts): Kafka Streams'
 * commit.interval.ms under exactly-once. A record's commit, and an envelope's visibility, wait up
 * to this much more; a crash replays nothing more, as the replay check skips what was stored.
 */
const TRANSACTION_SPACING_MS = 100;

/** Pause before a refused commit is sent again: the rebalance needs the poll loop meanwhile. */
const COMMIT_RETRY_MS = 500;
/** Most DLQ deliveries awaited at once before polling pauses. */
const MAX_DLQ_AWAITED = 10_000;
/** Most bytes of DLQ envelopes (as written) awaited at once before polling pauses. */
const MAX_DLQ_AWAITED_BYTES = 32 << 20;
/**
 * Bytes of DLQ envelopes settled between two collections. An envelope of a large record leaves a
 * few times its size of garbage (the poll's copy, the payload's text, the envelope, the producer's
 * copy) outside the heap the collector paces itself by: 45 records of 15 MiB, each dead-lettered
 * with its first 1 MiB, peaked at 309 MiB on a busy machine against the 280 MiB bound.
 */
const GC_EVERY_DLQ_BYTES = 8 << 20;
/** Most records handed over between two yields to the event loop (~5-10 ms of work), so HTTP stays responsive. */
const MAX_POLL = 300;

/**
 * Heartbeat refusals that say the group no longer counts the member: ILLEGAL_GENERATION,
 * UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH (librdkafka's codes).
 */
const NOT_A_MEMBER = new Set([22, 25, 82, 110]);

export interface DeliveryOptions {
  topic: string;
  batchSize: number;
  /** BATCH_BACKLOG_ROWS: what a batch may grow to while every insert is in flight (default: batchSize). */
  batchBacklogRows?: number;
  /** Bytes of body plus payloads at which a batch seals (BATCH_MAX_BYTES); default 16 MiB. */
  batchMaxBytes?: number;
  flushIntervalMs: number;
  concurrency: number;
  retry: RetryPolicy;
  dlqMaxRatio: number;
  dlqRatioWindow: number;
  /** The group's session.timeout.ms (librdkafka's default 45 s): half of it unseen looks like a freeze. */
  sessionTimeoutMs?: number;
  /** max.poll.interval.ms (default 300 s): a revocation unsettled past it is dropped, not flushed. */
  maxPollIntervalMs?: number;
}

export interface DeliveryDeps {
  consumer: GroupConsumer;
  writer: ClickHouseWriter;
  dlq: DlqPublisher;
  counters: Counters;
  /** Exactly-once (DELIVERY): what the last owners of newly assigned partitions delivered. */
  replays?: ReplayFinder;
  /**
   * Exactly-once: every commit goes with the DLQ envelopes it passes in one Kafka transaction, which
   * is also what `dlq` produces through; nothing commits through the consumer.
   */
  transactions?: TransactionalCommits<GroupToken>;
  /** Time and timers (the delivery simulation runs a virtual clock); the process's own by default. */
  clock?: Clock;
  /** Where gaps in the offsets handed over are told apart (offsets/gaps.ts); none: not accounted. */
  offsets?: {
    /** Each partition's log start now. */
    logStarts(partitions: readonly number[]): Promise<Map<number, number>>;
    /** At-least-once: the group's committed offsets (-1 where none), where a new assignment starts. */
    committed?(partitions: readonly number[]): Promise<Map<number, number>>;
    /**
     * The consumer hands out every offset librdkafka passes over on purpose (Message.passedOver):
     * any other gap at or above the log start is a skip, read again (offsets/gaps.ts).
     */
    skipsTold?: boolean;
  };
}

export interface DeliveryEvents {
  onFatal: (e: unknown) => void;
  /** Something settled: a batch slot, DLQ room, a commit position or a replay check may have come free. */
  onSettled: () => void;
}

/** How often a batch the DLQ breaker holds is tried again. */
export const HOLD_RETRY_MS = 5_000;

/** The warning's words for records librdkafka hands out again (records_repeated counts them). */
const REFETCHED = "librdkafka handed out records already consumed";

export class Delivery {
  readonly #opts: DeliveryOptions;
  readonly #deps: DeliveryDeps;
  readonly #batcher: Batcher;
  readonly #tracker: OffsetTracker;
  readonly #clock: Clock;
  readonly #breaker: DlqBreaker;
  readonly #gate: Gate;
  readonly #holds = new Map<Batch, Hold[]>();
  readonly #flushDeps: FlushDeps;
  #events: DeliveryEvents = { onFatal: () => {}, onSettled: () => {} };
  readonly #pending: Pending;
  readonly #commits: CommitScheduler;
  readonly #passOver: PassOver;
  #replays: Replays | null = null;
  readonly #lease: Lease;
  /** Exactly-once: sends go only while the coordinator's answers prove membership (membership.ts). */
  readonly #membership: MembershipLease | null;
  /** Partitions were assigned while no lease was held: consumption waits for a proof (#stand). */
  #unproven = false;
  /** Aborted when the assignment is lost: what was sent under it sends nothing more. */
  #epoch = new AbortController();
  /** The epoch's waits for a partition's earlier records to be durable (#reached), ended by its loss. */
  #reachWaiting = new Set<() => void>();
  /** Runs of records handed out again since the last poll, said once each (#sayRefetched). */
  #refetchedRuns: Array<{ partition: number; from: number; to: number; ownSeek: boolean }> = [];
  /** The coordinator's last answer to a heartbeat said the group no longer counts this member. */
  #removed = false;
  /** The statistics showed a librdkafka without the heartbeat facts: said once, as the worker stops. */
  #unpatchedSaid = false;
  /** Resolved by `abandon()`: ends a settle that waits for work that no longer counts. */
  #abandoned = Promise.withResolvers<void>();
  #dlqAwaited = 0;
  #dlqAwaitedBytes = 0;
  /** DLQ envelope bytes settled since the last collection (GC_EVERY_DLQ_BYTES). */
  #dlqSettledBytes = 0;
  /** Batches waiting for an unreachable ClickHouse (CH_UNREACHABLE_POLICY=wait). */
  #waitingBatches = 0;
  /** Counts the operator's resets of the breaker: a batch held before one goes its usual way. */
  #released = 0;
  /** The waits of held batches, cut short by a reset. */
  readonly #heldWaiting: Array<() => void> = [];
  /**
   * Recent bytes a record holds in a batch (row plus payload: twice its size), for pollMax. It
   * starts at what the largest record the raw topic admits (1 MiB) holds, so the first poll cannot
   * take hundreds of them.
   */
  #recordBytes = 2 << 20;
  /** Gaps in the offsets handed over, told apart (offsets/gaps.ts). */
  readonly #gaps: Gaps | null;
  /** At-least-once: per partition, the latest read of where its assignment starts (#readStarts). */
  readonly #starts = new Map<number, number>();
  /** The last record's partition counters: a poll's records come grouped by partition, so one lookup a run. */
  #partitionCounters: PartitionCounters | null = null;

  constructor(opts: DeliveryOptions, deps: DeliveryDeps) {
    this.#opts = opts;
    this.#deps = deps;
    const clock = (this.#clock = deps.clock ?? systemClock);
    // Holds are stamped with the wall clock (a commit's `since` is compared with ingested_at and
    // envelope timestamps); the flush interval runs on the monotonic one, so a wall clock stepped
    // back cannot hold a partial batch back until it catches up.
    const seek = deps.consumer.seek;
    const gaps = (this.#gaps = deps.offsets
      ? new Gaps({
          logStarts: (ps) => deps.offsets!.logStarts(ps),
          counters: deps.counters,
          clock,
          settle: (hold) => {
            this.#tracker.settle(hold);
            this.#commits.schedule();
          },
          skips:
            deps.offsets.skipsTold && seek
              ? {
                  rewind: (partition, offset) => {
                    this.#tracker.rewound(partition, offset);
                    seek.call(deps.consumer, [{ topic: opts.topic, partition, offset: BigInt(offset) }]);
                  },
                  deadLetter: (partition, offsets, reads) => this.#deadLetterSkipped(partition, offsets, reads),
                }
              : undefined,
        })
      : null);
    this.#tracker = new OffsetTracker(
      () => clock.now(),
      gaps ? (partition, from, to, hold) => gaps.found({ partition, from, to, hold }) : undefined,
    );
    this.#batcher = new Batcher(opts.batchSize, opts.concurrency, () => new RowBinaryBuffer(), {
      maxBytes: opts.batchMaxBytes ?? 16 << 20,
      backlogRows: opts.batchBacklogRows ?? opts.batchSize,
      clock: () => clock.mono(),
    });
    this.#breaker = new DlqBreaker(opts.dlqMaxRatio, opts.dlqRatioWindow);
    this.#gate = new Gate(deps.consumer);
    const { writer, dlq, counters } = deps;
    const onWaiting = (waiting: boolean) => this.#onWaiting(waiting);
    const admit = (signal: AbortSignal) => this.#admit(signal);
    this.#flushDeps = { writer, dlq, counters, topic: opts.topic, retry: opts.retry, onWaiting, admit, clock };
    // Every record counts once, where it ended: a valid one when its batch settles.
    this.#flushDeps.onSettled = (stored, dead) => {
      if (this.#breaker.recordMany(stored, false) || this.#breaker.recordMany(dead, true)) this.#trip();
    };
    this.#flushDeps.holdBatch = (stored, dead, signal) => this.#holdBatch(stored, dead, signal);
    this.#flushDeps.heldTaken = () => this.#heldTaken();
    if (deps.transactions) {
      this.#flushDeps.envelopesReady = (batch, signal) => this.#batchReached(batch, signal);
      this.#flushDeps.admitEnvelopes = (signal) => this.#admitEnvelopes(signal);
    }
    this.#lease = new Lease(
      (opts.sessionTimeoutMs ?? 45_000) / 2,
      {
        onHold: () => {
          counters.loopStalls++;
          this.#gate.closeAll("lease");
        },
        onClear: () => {
          this.#gate.openAll("lease");
          this.#events.onSettled();
        },
      },
      undefined,
      clock,
    );
    // While a send waits for a proof of membership, consumption pauses and the loop goes on polling
    // (awaitingMembership): the proofs come from the consumer's statistics, served by its polls.
    const onMembershipWait = (waiting: boolean) => {
      if (waiting) return this.#gate.closeAll("membership");
      if (!this.#unproven) this.#gate.openAll("membership");
      this.#events.onSettled();
    };
    const terms = { sessionTimeoutMs: opts.sessionTimeoutMs ?? 45_000, rebalanceTimeoutMs: this.maxPollIntervalMs };
    const membership = deps.replays ? new MembershipLease(terms, clock, onMembershipWait) : null;
    this.#membership = membership;
    if (membership) deps.consumer.onStanding((standing) => this.#stand(membership, standing));
    this.#pending = new Pending(
      (e) => this.#events.onFatal(e),
      () => this.#events.onSettled(),
    );
    this.#commits = new CommitScheduler(
      this.#tracker,
      async (positions) => void (await this.#commit(positions)),
      (e) => this.#events.onFatal(e),
      deps.transactions ? { spacingMs: TRANSACTION_SPACING_MS, clock } : undefined,
    );
    this.#passOver = new PassOver(deps.consumer, clock, (positions) => this.#moveTo(positions));
  }

  /** The group's session as the coordinator now keeps it (KIP-848: read again, kafka/session-watch.ts). */
  sessionChanged(sessionTimeoutMs: number): void {
    this.#membership?.setTerms({ sessionTimeoutMs, rebalanceTimeoutMs: this.maxPollIntervalMs });
  }

  /** The worker's ears: called back on a fatal failure and whenever something settles. */
  listen(events: DeliveryEvents): void {
    this.#events = events;
    if (this.#deps.replays)
      this.#replays = new Replays(this.#deps.replays, this.#gate, this.#deps.counters, {
        onFatal: (e) => events.onFatal(e),
        onReady: () => events.onSettled(),
        commitMarks: (marks) => this.#commitMarks(marks),
        started: (partition, committed) => this.#tracker.startAt(partition, committed),
      }, this.#clock);
  }

  // Read-only views for stats and readiness.
  get bufferedRows(): number { return this.#batcher.bufferedRows; } // prettier-ignore
  get breakerRatio(): number { return this.#breaker.ratio; } // prettier-ignore
  get tripped(): boolean { return this.#breaker.tripped; } // prettier-ignore
  /** Partitions paused until their replay check answers (exactly-once). */
  get replayChecksPending(): number { return this.#replays?.pending ?? 0; } // prettier-ignore
  /** Why a partition is paused now (gate.ts), none when it may fetch. */
  pausedBy(partition: number): string[] {
    return this.#gate.heldBy(partition);
  }
  /**
   * The coordinator refused this member's last heartbeat as no member of the group (removed or
   * fenced): its partitions are another's, though librdkafka may not say so while a revocation
   * is pending (KIP-848 defers the rejoin inside a rebalance callback).
   */
  get removedFromGroup(): boolean {
    return this.#removed;
  }

  /** How long a revocation may take to settle before the group has surely evicted the member. */
  get maxPollIntervalMs(): number { return this.#opts.maxPollIntervalMs ?? 300_000; } // prettier-ignore
  /** The clocks this delivery runs on, for the loop that drives it. */
  get clock(): Clock { return this.#clock; } // prettier-ignore
  positions(): Map<number, { committed: number; consumed: number }> {
    return this.#tracker.positions();
  }

  /**
   * The loop found no record: a partition whose every record handed over is durable moves to
   * librdkafka's position, past control records and aborted records (offsets/pass-over.ts), and
   * the move is committed.
   */
  idle(): void {
    this.#passOver.tick();
  }

  #moveTo(positions: ReadonlyArray<{ partition: number; offset: number }>): void {
    let moved = false;
    for (const { partition, offset } of positions)
      if (offset >= 0 && this.#tracker.passOver(partition, offset)) moved = true;
    if (moved) this.#commits.schedule();
  }

  /** No room for another record: every batch slot is busy, or the DLQ sends awaited are at their bound. */
  /** A send waits for a proof of membership: the loop polls, full or not (consumption is paused meanwhile). */
  get awaitingMembership(): boolean {
    return this.#membership?.waiting ?? false;
  }

  get full(): boolean {
    return (
      this.#batcher.room === 0 || this.#dlqAwaited >= MAX_DLQ_AWAITED || this.#dlqAwaitedBytes >= MAX_DLQ_AWAITED_BYTES
    );
  }

  /**
   * How many records to take from the consumer: the rows that fit, and the records of the recent
   * average size that fit in the bytes left. librdkafka's queue can hold far more than its
   * prefetch bound (one fetch response may be 50 MiB), so a poll of BATCH_SIZE large records could
   * otherwise overshoot BATCH_MAX_BYTES many times over while no batch slot is free.
   */
  pollMax(): number {
    const rows = Math.min(this.#batcher.room, MAX_POLL);
    const bySize = Math.floor(this.#batcher.bytesRoom / this.#recordBytes);
    return Math.max(1, Math.min(rows, bySize));
  }

  /** A poll's records arrive: their sizes steer pollMax, their count the counters. */
  received(messages: readonly Message[]): void {
    if (this.#refetchedRuns.length > 0) this.#sayRefetched();
    let bytes = 0;
    let records = 0;
    for (const m of messages) {
      bytes += m.value?.length ?? 0;
      if (!m.passedOver) records++;
    }
    // Twice the record's bytes: its encoded row and its payload string are both held. Up at once
    // when records grow, down by half a poll when they shrink.
    if (records > 0) this.#recordBytes = Math.max(64, (2 * bytes) / records, this.#recordBytes / 2);
    this.#deps.counters.consumed += records;
  }

  /**
   * An offset librdkafka passed over on purpose and said so (a transaction's control record, an
   * aborted record): no record, but the position moves past it, and it is no gap.
   */
  passedOver(m: Message): void {
    if (this.#tracker.consumedAlready(m.partition, m.offset)) return;
    this.#tracker.passed(m.partition, m.offset);
    this.#deps.counters.offsetsPassedOver++;
    this.#deps.counters.partition(m.partition).passedOver++;
    this.#commits.schedule();
  }

  /**
   * Offsets skipped on every read (offsets/gaps.ts): each gets an envelope, as a record librdkafka
   * could not read does, held inside its gap, so the partition moves on and every offset ends somewhere.
   */
  #deadLetterSkipped(partition: number, offsets: readonly number[], reads: number): void {
    const now = this.#clock.now();
    for (const offset of offsets) {
      const text = `librdkafka moved past offset ${offset} without a record or a word, on ${reads} reads`;
      const { topic } = this.#opts;
      const m: Message = { topic, partition, offset, timestamp: -1, value: null, key: null, error: "SKIPPED" };
      this.#deps.counters.consumed++;
      this.handOver(m, undecodable("SKIPPED", text), now);
    }
  }

  /** One decoded record handed over: a row to buffer, a rejection to dead-letter, or a replay to skip. */
  handOver(m: Message, result: Verdict, ingestedAt: number): void {
    const { counters } = this.#deps;
    if (this.#tracker.consumedAlready(m.partition, m.offset)) {
      // Handed out again by librdkafka under the same assignment (seen once in CI, a partial batch
      // after a pause and resume): its first copy is stored or on its way, a second would be a row
      // twice. Offsets only grow within an assignment; a new one resets the partition.
      counters.consumed--;
      this.#refetched(m, this.#tracker.byOwnSeek(m.partition, m.offset));
      return;
    }
    if (this.#replays?.delivered(m.partition, m.offset, result)) {
      // The last owner's: durable already, counted by replays_skipped, never in flight here.
      counters.consumed--;
      counters.replaysSkipped++;
      this.#tracker.trackAlone(m.partition, m.offset).done = true;
      this.#commits.schedule();
      return;
    }
    let pc = this.#partitionCounters;
    if (pc?.partition !== m.partition) this.#partitionCounters = pc = counters.partition(m.partition);
    pc.consumed++;
    if (result.ok) {
      // A batch full by bytes with no free slot takes the rest of this poll (at most the 4 MiB
      // prefetch queue, docs/internals.md "Memory, in bytes"); the loop polls nothing more until a slot frees.
      if (this.#batcher.sealable) this.#flush(this.#batcher.seal());
      const batch = this.#batcher.current;
      const hold = this.#tracker.track(m.partition, m.offset, batch);
      if (hold) this.#holdsOf(batch).push(hold);
      if (result instanceof ScannedRow) batch.addScanned(result, ingestedAt, m.partition, m.offset, m.timestamp);
      else batch.add(result.row, ingestedAt, result.payload, m.partition, m.offset, m.timestamp);
      if (this.#replays?.unsure(m.partition, m.offset)) batch.unsure[batch.count - 1] = 1;
    } else {
      this.#deadLetter(m, result.rejection);
      if (this.#breaker.record(true)) this.#trip();
    }
  }

  /**
   * Paused, not stopped: the loop goes on polling (the group keeps the member), flushing and
   * committing what was consumed before the trip. Records wait in Kafka until the operator's word
   * (resetBreaker) or a restart.
   */
  #trip(): void {
    this.#gate.closeAll("breaker");
    log.error(
      "DLQ circuit breaker tripped: consumption paused; fix the producer or the table, then reset it " +
        "(cdr-worker probe --post http://127.0.0.1:<STATS_PORT>/internal/breaker/reset) or restart",
      { ratio: this.#breaker.ratio, max_ratio: this.#opts.dlqMaxRatio },
    );
  }

  /** The operator's word: the breaker's window starts anew and consumption resumes. False if it was not tripped. */
  resetBreaker(): boolean {
    if (!this.#breaker.tripped) return false;
    this.#breaker.reset();
    this.#gate.openAll("breaker");
    // Batches held meanwhile go their usual way now, their envelopes counted in the new window.
    this.#released++;
    for (const go of [...this.#heldWaiting]) go();
    log.info("DLQ circuit breaker reset by the operator; consumption resumed");
    return true;
  }

  /**
   * A batch whose envelopes would trip the breaker (or go while it is tripped) is held: the breaker
   * trips, consumption pauses, and the batch is tried again every HOLD_RETRY_MS (true), until
   * ClickHouse takes it whole (heldTaken) or the operator resets the breaker (false: it goes on).
   */
  async #holdBatch(stored: number, dead: number, signal: AbortSignal): Promise<boolean> {
    const epoch = this.#released;
    if (!this.#breaker.wouldTrip(stored, dead)) return false;
    if (!this.#breaker.tripped) {
      this.#breaker.hold();
      this.#trip();
    }
    log.warn("a batch whose envelopes the DLQ breaker would not let through is held and tried again", {
      rows: stored + dead,
      dead,
      retry_ms: HOLD_RETRY_MS,
    });
    await new Promise<void>((go) => {
      const done = () => {
        cancel();
        signal.removeEventListener("abort", done);
        const at = this.#heldWaiting.indexOf(done);
        if (at >= 0) this.#heldWaiting.splice(at, 1);
        go();
      };
      const cancel = this.#clock.setTimeout(done, HOLD_RETRY_MS);
      signal.addEventListener("abort", done);
      this.#heldWaiting.push(done);
    });
    return this.#released === epoch && !signal.aborted;
  }

  /** A held batch was taken whole: what tripped the breaker is gone, consumption resumes. */
  #heldTaken(): void {
    if (!this.#breaker.tripped) return;
    this.#breaker.reset();
    this.#gate.openAll("breaker");
    log.info("a batch the DLQ breaker held was taken whole by ClickHouse; the breaker is reset, consumption resumed");
  }

  /**
   * Looks at the clocks (lease.ts) for a loop that waits without passing flushIfDue: a revocation
   * settling, a drain. Unlooked, their wait would read as a freeze once it ended, and hold every
   * send for the group's verdict for nothing.
   */
  watchClocks(): void {
    this.#lease.look();
  }

  /** Seals and flushes the filling batch when it is full or its interval passed. */
  flushIfDue(): void {
    if (this.#lease.look()) return; // perhaps a zombie: the group's verdict first
    if (this.#batcher.due(this.#opts.flushIntervalMs)) this.#flush(this.#batcher.seal());
  }

  /** Newly assigned partitions: tracked afresh, paused while a reason holds, checked for replays. */
  assigned(partitions: readonly TopicPartition[]): void {
    this.#tracker.reset(partitions.map((p) => p.partition));
    // A skip still read again under the last assignment belongs to it: its seek must not come now.
    this.#gaps?.forget(partitions.map((p) => p.partition));
    // No proof of membership: the answer that carried the assignment may have been held up (a cut
    // from the brokers) past the member's session, and its send time is unknown. Sends wait for a
    // heartbeat proven (membership.ts). Without a lease yet (a worker that has just joined), the
    // partitions wait paused as the consumer handed them over, fetching nothing: records taken now
    // would only fill the batches while the first heartbeat is proven.
    // The check's pause first: the gate resumes only what no reason holds.
    this.#replays?.check(partitions);
    if (!this.#replays) this.#readStarts(partitions.map((p) => p.partition));
    if (this.#membership && !this.#membership.held) {
      this.#unproven = true;
      this.#gate.closeAll("membership");
    }
    this.#gate.assigned(partitions);
  }

  /**
   * The coordinator's last answer: the lease renewed or ended. Renewed, partitions assigned without
   * one may fetch, unless a send still waits. One pause reason serves both waits ("membership"),
   * lifted after the poll that served the proof has returned, so that poll hands nothing out.
   */
  #stand(membership: MembershipLease, standing: Standing): void {
    membership.stand(standing);
    if (standing.kind === "unpatched" && !this.#unpatchedSaid) {
      // Without the facts no heartbeat proves membership and no insert would ever be sent: stop, saying why.
      this.#unpatchedSaid = true;
      const why =
        "the librdkafka loaded (LIBRDKAFKA_PATH?) lacks the project's heartbeat-facts patch: exactly-once " +
        "cannot prove this member's membership; load the project's build (scripts/librdkafka/build.sh) " +
        "or set DELIVERY=at-least-once";
      this.#events.onFatal(new CdrWorkerError("LIBRARY_UNAVAILABLE", why));
      return;
    }
    this.#removed = standing.kind === "refused" && NOT_A_MEMBER.has(standing.err);
    if (!this.#unproven || !membership.held) return;
    this.#unproven = false;
    queueMicrotask(() => {
      if (!membership.waiting) this.#gate.openAll("membership");
      this.#events.onSettled();
    });
  }

  /**
   * Records handed out again: dropped, and said once per run of them. Those the worker's own seek
   * back to a skipped range brings again are its doing, not librdkafka's: said apart, not counted
   * as repeats (records_repeated pages nobody, but it is read as librdkafka's).
   */
  #refetched(m: Message, ownSeek: boolean): void {
    const { counters } = this.#deps;
    if (!ownSeek) {
      counters.recordsRepeated++;
      counters.partition(m.partition).repeated++;
    }
    const last = this.#refetchedRuns.at(-1);
    if (last && last.partition === m.partition && m.offset === last.to && last.ownSeek === ownSeek)
      return void (last.to = m.offset + 1);
    this.#refetchedRuns.push({ partition: m.partition, from: m.offset, to: m.offset + 1, ownSeek });
  }

  /**
   * One line a run of records handed out again: the range and the count. Every one lies below the
   * highest offset consumed under this assignment, so its first copy is stored or on its way.
   */
  #sayRefetched(): void {
    for (const { ownSeek, ...r } of this.#refetchedRuns) {
      const range = { partition: r.partition, from: r.from, to: r.to, records: r.to - r.from };
      const what = ownSeek ? "records read again after the seek back to skipped offsets" : REFETCHED;
      (ownSeek ? log.info : log.warn)(`${what}; dropped, not stored again`, range);
    }
    this.#refetchedRuns = [];
  }

  /** Flushes what is buffered and waits until every record is durable and its offset committed. */
  async settle(): Promise<void> {
    if (this.#refetchedRuns.length > 0) this.#sayRefetched();
    const epoch = this.#epoch;
    for (;;) {
      if (this.#batcher.current.count > 0 && this.#batcher.sealed < this.#batcher.concurrency)
        this.#flush(this.#batcher.seal());
      if (this.#pending.size === 0 && this.#batcher.current.count === 0) break;
      await Promise.race([this.#pending.any(), this.#abandoned.promise]);
      if (this.#commits.stopped || this.#epoch !== epoch) return;
    }
    this.#commits.schedule();
    await this.#commits.settled();
  }

  /** Pauses every partition while a revocation settles: the loop polls for the group, not for records. */
  pauseForRevoke(): void {
    this.#gate.closeAll("revoke");
  }

  resumeAfterRevoke(): void {
    this.#gate.openAll("revoke");
  }

  /**
   * The group took the whole assignment away (a lost revocation): its next owner's replay check may
   * already have run, so nothing held of it may reach ClickHouse or be committed now. The filling
   * batch is dropped; sealed batches send nothing more (an insert already on the wire ends as it
   * ends, and was sent before the loss was known); no hold of it is marked or committed. Their
   * records are the next owner's to replay. DLQ sends already handed to the producer still go: an
   * envelope of a record its next owner dead-letters again is a duplicate in the DLQ, not a loss.
   */
  abandon(): void {
    const { counters } = this.#deps;
    const dropped = this.#batcher.bufferedRows;
    this.#epoch.abort();
    this.#epoch = new AbortController();
    const waiting = this.#reachWaiting;
    this.#reachWaiting = new Set();
    for (const done of waiting) done();
    this.#holds.delete(this.#batcher.current);
    this.#batcher.discard();
    this.#tracker.reset();
    // Envelopes of the lost partitions may be in the open transaction: it never commits.
    if (this.#deps.transactions) this.#pending.add(this.#deps.transactions.abandon());
    this.#abandoned.resolve();
    this.#abandoned = Promise.withResolvers<void>();
    counters.assignmentsLost++;
    counters.lostRowsDropped += dropped;
    counters.forgetInFlight();
    log.warn("assignment lost: held rows dropped, unsent inserts cancelled; their next owner replays them", {
      rows: dropped,
    });
  }

  /**
   * At-least-once: where each newly assigned partition starts (its committed offset), so that a first
   * record past it is accounted as a gap. Read beside consumption, not before it: an answer that
   * comes after the partition was revoked, or assigned again, is dropped.
   */
  #readStarts(partitions: readonly number[]): void {
    const read = this.#deps.offsets?.committed;
    if (!read || partitions.length === 0) return;
    const asked = new Map(partitions.map((p) => [p, (this.#starts.get(p) ?? 0) + 1] as const));
    for (const [p, n] of asked) this.#starts.set(p, n);
    read(partitions).then(
      (committed) => {
        for (const [p, n] of asked) {
          const offset = committed.get(p);
          if (this.#starts.get(p) === n && offset !== undefined && offset >= 0) this.#tracker.startAt(p, offset);
        }
      },
      (e) => log.warn("committed offsets not read: the first gap of these partitions goes unaccounted", {
        partitions,
        err: e as Error,
      }),
    );
  }

  /** Revoked partitions, settled first: forgotten, so their positions are never handed out again. */
  release(partitions: readonly TopicPartition[]): void {
    for (const p of partitions) this.#starts.set(p.partition, (this.#starts.get(p.partition) ?? 0) + 1);
    this.#tracker.reset(partitions.map((p) => p.partition));
    this.#gaps?.forget(partitions.map((p) => p.partition));
    this.#deps.transactions?.release(partitions.map((p) => p.partition));
    this.#gate.forget(partitions);
    this.#replays?.forget(partitions);
    this.#batcher.touch();
  }

  /** No commit after a fatal error: nothing further may be made to look durable. */
  stop(): void {
    this.#commits.stop();
    this.#replays?.stop();
    this.#gaps?.stop();
  }

  /**
   * Before each insert is sent: not while a freeze's verdict is awaited, not past the membership
   * lease (until a heartbeat renews it), never after a loss. Resolves to the lease's end (monotonic ms), where
   * there is one: the insert's request is ended then, so none of its bytes reaches ClickHouse after
   * the group may have given its partitions to a successor.
   */
  async #admit(signal: AbortSignal): Promise<number | undefined> {
    await this.#lease.clear();
    await this.#membership?.hold(signal);
    if (signal.aborted) throw new AssignmentLostError("insert not sent");
    return this.#membership?.until;
  }

  /**
   * Before a batch's rows go to the DLQ in a transaction: not while a freeze's verdict is awaited,
   * never after a loss. No membership lease: the group shows the envelopes only with a commit it
   * accepts from a member of the current generation (KIP-447), and a commit is the lease's proof.
   */
  async #admitEnvelopes(signal: AbortSignal): Promise<void> {
    await this.#lease.clear();
    if (signal.aborted) throw new AssignmentLostError("envelopes not sent");
  }

  /**
   * Resolves once every earlier hold of `hold`'s partition is done (tracker.whenReached), or on a
   * loss. `signal` is the epoch's: not aborted, it is the current one, whose loss ends #reachWaiting
   * (one set, not an abort listener per dead-lettered record).
   */
  #reached(hold: Hold, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiting = this.#reachWaiting;
      const done = () => {
        if (waiting.delete(done)) resolve();
      };
      waiting.add(done);
      this.#tracker.whenReached(hold, done);
    });
  }

  /**
   * Before a batch's rows go to the DLQ in a transaction: every record before the batch is durable,
   * in each of its partitions. Only the batch's first hold of each partition is awaited: a later
   * one waits for the batch itself.
   */
  async #batchReached(batch: Batch, signal: AbortSignal): Promise<void> {
    const first = new Map<number, Hold>();
    for (const h of this.#holds.get(batch) ?? []) if (!first.has(h.partition)) first.set(h.partition, h);
    await Promise.all([...first.values()].map((h) => this.#reached(h, signal)));
  }

  #holdsOf(batch: Batch): Hold[] {
    let holds = this.#holds.get(batch);
    if (!holds) this.#holds.set(batch, (holds = []));
    return holds;
  }

  /** A sealed batch into ClickHouse; its rows' offsets become committable once it is durable. */
  #flush(batch: Batch): void {
    const { signal } = this.#epoch;
    this.#pending.add(
      flushBatch(batch, this.#flushDeps, signal).then(() => {
        // Abandoned: its holds were forgotten with the lost assignment and must never commit.
        if (!signal.aborted) {
          const holds = this.#holds.get(batch) ?? [];
          for (const h of holds) h.done = true;
          if (this.#deps.transactions) for (const h of holds) this.#tracker.reach(h.partition);
        }
        this.#holds.delete(batch);
        // A batch sealed by bytes held records of megabytes each: their poll copies, texts and rows
        // are garbage now. The collector is paced by the heap, not by these buffers outside it, and
        // would let many such batches pile up before reclaiming them: collected now.
        const large = batch.bytes >= batch.maxBytes / 2;
        this.#batcher.release(batch);
        if (large) Bun.gc(true);
        this.#commits.schedule();
      }),
    );
  }

  /** An invalid record to the DLQ; its offset becomes committable once the DLQ acknowledged it. */
  #deadLetter(m: Message, rejection: Rejection): void {
    // Fields, not the message: its value is a view into the whole poll's slab, which the pending
    // send would otherwise keep alive until the DLQ acknowledges.
    const { topic, partition, offset } = m;
    const hold = this.#tracker.trackAlone(partition, offset);
    // Written now, so what waits is counted as it will be sent: an envelope escapes a payload of
    // control characters to six bytes each.
    const envelope = this.#deps.dlq.encodeRejection(rejection, { topic, partition, offset });
    const { bytes } = envelope;
    this.#dlqAwaited++;
    this.#dlqAwaitedBytes += bytes;
    const { signal } = this.#epoch;
    const send = () => this.#deps.dlq.publish(envelope);
    // In a transaction the envelope waits until every earlier record of its partition is durable,
    // so the commit of its transaction passes it (transactional-commits.ts); it needs no lease, as
    // only a commit the group accepts shows it. Otherwise, past the membership lease it waits for
    // its renewal. It goes nowhere if the assignment is lost meanwhile: its next owner dead-letters
    // the record.
    const lease = this.#membership;
    const sent = this.#deps.transactions
      ? this.#reached(hold, signal).then(() => (signal.aborted ? undefined : send()))
      : lease && !lease.held
        ? lease.hold(signal).then(() => (signal.aborted ? undefined : send()))
        : send();
    this.#pending.add(
      sent.then(() => {
        this.#dlqAwaited--;
        this.#dlqAwaitedBytes -= bytes;
        this.#dlqSettledBytes += bytes;
        if (this.#dlqSettledBytes >= GC_EVERY_DLQ_BYTES) {
          this.#dlqSettledBytes = 0;
          Bun.gc(true);
        }
        if (signal.aborted) return; // forgotten with the lost assignment
        hold.done = true;
        this.#deps.counters.recordRejected(partition, rejection.reason);
        this.#commits.schedule();
      }),
    );
  }

  /**
   * No ClickHouse endpoint answers and the policy is to wait: the assignment is paused, so records
   * wait in Kafka rather than fill memory or the DLQ, and the loop goes on polling (the group keeps
   * the member) and committing. Resumed once no batch waits (and no other reason holds).
   */
  #onWaiting(waiting: boolean): void {
    this.#waitingBatches += waiting ? 1 : -1;
    if (waiting && this.#waitingBatches === 1) {
      this.#gate.closeAll("clickhouse");
      log.warn(
        "no ClickHouse endpoint takes inserts (none answers, or each refuses the worker); " +
          "consumption paused until one does (CH_UNREACHABLE_POLICY=wait)",
      );
    } else if (!waiting && this.#waitingBatches === 0) {
      this.#gate.openAll("clickhouse");
      log.info("ClickHouse answers again; consumption resumed");
    }
  }

  /**
   * A commit the group refuses because it is rebalancing (REBALANCE_IN_PROGRESS; after a session or
   * coordinator loss UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION; under KIP-848 STALE_MEMBER_EPOCH or
   * FENCED_MEMBER_EPOCH) advanced nothing and is no commit failure: the partitions may have moved.
   * Nor does one a later attempt gets past (a retryable error: the coordinator loading its groups
   * after a broker restart, moving, or not answering in time). Their positions are handed out again
   * after COMMIT_RETRY_MS for the partitions still owned; a partition revoked meanwhile is reset on
   * release, so its records replay at the next owner. Every other failure is fatal (the scheduler's
   * onError).
   */
  async #commit(positions: Advanced[]): Promise<boolean> {
    const { consumer, counters, transactions } = this.#deps;
    // The assignment the positions were handed out under.
    const { signal } = this.#epoch;
    let sent = positions;
    try {
      if (transactions) {
        // Asked once every envelope of the transaction is delivered: every position as it stands
        // then, so each envelope's record is passed (transactional-commits.ts checks it). An
        // assignment lost while this commit waited for the one before (a coordinator that did not
        // answer, a freeze) leaves its positions unsent: the same partitions may be back under a
        // new generation, which would accept them though what they pass was never made durable.
        const committed = await transactions.commit(() => {
          sent = signal.aborted ? [] : this.#inTransaction(positions);
          return this.#offsets(sent, true);
        });
        if (!committed) {
          this.#refused(sent, transactions.refusal);
          return false;
        }
      } else {
        // Each position carries what the partition's next owner needs to skip what was delivered
        // past it (offsets/commit-metadata.ts), whichever delivery mode runs now or next.
        await consumer.commit(this.#offsets(positions, false));
      }
    } catch (e) {
      if (!(e instanceof KafkaError) || !(REBALANCE_REFUSALS.has(e.kafkaName ?? "") || e.retryable)) throw e;
      this.#refused(sent, e.kafkaName);
      return false;
    }
    this.#tracker.confirm(sent);
    counters.commits++;
    counters.lastCommitAt = this.#clock.now();
    return true;
  }

  /**
   * The replay check's first marks (partitions whose commit carries no metadata), committed as
   * this member's own commits are: through the transaction, with every other partition's standing
   * position. The open transaction may hold envelopes of those partitions; a commit of the marks
   * alone would leave them past their commit, abort, and do so again at every try.
   */
  async #commitMarks(marks: readonly TopicPartition[]): Promise<void> {
    const transactions = this.#deps.transactions;
    if (!transactions) throw new Error("the replay check's marks need exactly-once's transactions");
    const marked = new Set(marks.map((m) => m.partition));
    let standing: Advanced[] = [];
    const committed = await transactions.commit(() => {
      standing = this.#inTransaction([]).filter((p) => !marked.has(p.partition));
      return [...marks, ...this.#offsets(standing, true)];
    });
    if (!committed) {
      this.#tracker.refused(standing);
      const refusal = transactions.refusal;
      throw new KafkaError("KAFKA_COMMIT", "the replay check's commit was refused", undefined, refusal, true);
    }
    this.#tracker.confirm(standing);
  }

  /** The positions handed out, and every other partition's as it stands now (newer wins). */
  #inTransaction(positions: readonly Advanced[]): Advanced[] {
    const now = this.#clock.now();
    this.#tracker.advanced(now);
    const all = new Map(positions.map((p) => [p.partition, p]));
    for (const p of this.#tracker.standing(now)) all.set(p.partition, p);
    return [...all.values()];
  }

  #offsets(positions: readonly Advanced[], transactional: boolean): TopicPartition[] {
    const replays = this.#replays;
    return positions.map(({ partition, offset, since }) => ({
      topic: this.#opts.topic,
      partition,
      offset: BigInt(offset),
      metadata: commitMetadata(
        replays?.commitSince(partition, offset, since) ?? since,
        transactional && (replays?.commitTransactional(partition, offset) ?? true),
      ),
    }));
  }

  #refused(positions: Advanced[], code: string | undefined): void {
    this.#deps.counters.commitsRefused++;
    log.warn("commit refused (a rebalance, or a coordinator not ready); sent again for the partitions still owned", {
      code,
      partitions: positions.map((p) => p.partition),
    });
    this.#clock.setTimeout(
      () => {
        this.#tracker.refused(positions);
        this.#commits.schedule();
      },
      COMMIT_RETRY_MS,
      { unref: true },
    );
  }
}
