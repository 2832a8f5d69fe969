/**
 * Everything after the hand-over, owned here: a decoded record becomes a row in the filling batch
 * (batch/), a rejection a DLQ send, a record the partition's last owner delivered nothing at all
 * (replays.ts). Each record gets its offset hold here (offsets/tracker.ts), and the hold is marked
 * done here when its destination acknowledged; a sealed batch goes through the flush stage
 * (flush/flush-batch.ts) and what is durable is committed (offsets/). A DLQ or commit failure is
 * fatal: `onFatal`, and nothing is committed after it. The DLQ breaker, ClickHouse waits, replay
 * checks, revocations and a possible freeze (lease.ts) pause consumption through one gate
 * (gate.ts). Partitions the group took away are dropped, not flushed (`abandon`).
 *
 * Delivery keeps the hand-over and the routing. It no longer owns: the breaker's trips and held
 * batches (breaker-hold.ts); how a position is committed, and a refused commit sent again
 * (committer.ts); the runs of records handed out again and their lines (repeats.ts).
 */
import { undecodable, type Rejection, type Verdict } from "../cdr/decode.ts";
import { systemClock, type Clock } from "../time/clock.ts";
import { ScannedRow } from "../cdr/record-scan.ts";
import type { RetryPolicy } from "../clickhouse/retry.ts";
import { RowBinaryBuffer } from "../clickhouse/row-binary.ts";
import type { ClickHouseWriter } from "../clickhouse/writer.ts";
import type { DlqPublisher } from "../dlq/publisher.ts";
import { AssignmentLostError, CdrWorkerError } from "../errors.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import type { Standing } from "../kafka/heartbeat-proof.ts";
import type { Message } from "../kafka/message.ts";
import type { TopicPartition } from "../kafka/partition-list.ts";
import { log } from "../log.ts";
import type { Counters, PartitionCounters } from "../stats/counters.ts";
import type { Batch } from "./batch/batch.ts";
import { Batcher } from "./batch/batcher.ts";
import { BreakerHold } from "./breaker-hold.ts";
import { Committer } from "./committer.ts";
import { flushBatch, type FlushDeps } from "./flush/flush-batch.ts";
import { Gate } from "./gate.ts";
import { Lease } from "./lease.ts";
import { MembershipLease } from "../kafka/membership.ts";
import { Pending } from "./pending.ts";
import { CommitScheduler } from "./offsets/commit-scheduler.ts";
import { Gaps } from "./offsets/gaps.ts";
import { OffsetTracker, type Hold } from "./offsets/tracker.ts";
import { PassOver } from "./offsets/pass-over.ts";
import type { GroupToken, TransactionalCommits } from "./offsets/transactional-commits.ts";
import { Repeats } from "./repeats.ts";
import { Replays, type ReplayFinder } from "./replays.ts";

/**
 * The least time between two transactions' starts (offsets/commit-scheduler.ts): Kafka Streams'
 * commit.interval.ms under exactly-once. A record's commit, and an envelope's visibility, wait up
 * to this much more; a crash replays nothing more, as the replay check skips what was stored.
 */
const TRANSACTION_SPACING_MS = 100;

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

export class Delivery {
  readonly #opts: DeliveryOptions;
  readonly #deps: DeliveryDeps;
  readonly #batcher: Batcher;
  readonly #tracker: OffsetTracker;
  readonly #clock: Clock;
  readonly #breaker: BreakerHold;
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
  /** Records handed out again since the last poll, said once a run. */
  readonly #repeats: Repeats;
  readonly #committer: Committer;
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
    this.#gate = new Gate(deps.consumer);
    this.#breaker = new BreakerHold(opts.dlqMaxRatio, opts.dlqRatioWindow, this.#gate, clock);
    this.#repeats = new Repeats(deps.counters);
    const { writer, dlq, counters } = deps;
    const onWaiting = (waiting: boolean) => this.#onWaiting(waiting);
    const admit = (signal: AbortSignal) => this.#admit(signal);
    this.#flushDeps = { writer, dlq, counters, topic: opts.topic, retry: opts.retry, onWaiting, admit, clock };
    // Every record counts once, where it ended: a valid one when its batch settles.
    this.#flushDeps.onSettled = (stored, dead) => this.#breaker.settled(stored, dead);
    this.#flushDeps.holdBatch = (stored, dead, signal) => this.#breaker.hold(stored, dead, signal);
    this.#flushDeps.heldTaken = () => this.#breaker.taken();
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
    this.#committer = new Committer({
      topic: opts.topic,
      consumer: deps.consumer,
      counters,
      tracker: this.#tracker,
      clock,
      transactions: deps.transactions,
      replays: () => this.#replays,
      epoch: () => this.#epoch.signal,
      schedule: () => this.#commits.schedule(),
    });
    this.#commits = new CommitScheduler(
      this.#tracker,
      async (positions) => void (await this.#committer.commit(positions)),
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
        commitMarks: (marks) => this.#committer.commitMarks(marks),
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
    if (this.#repeats.unsaid) this.#repeats.say();
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
      this.#repeats.note(m.partition, m.offset, this.#tracker.byOwnSeek(m.partition, m.offset));
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
      this.#breaker.rejected();
    }
  }

  /** The operator's word: the breaker's window starts anew and consumption resumes. False if it was not tripped. */
  resetBreaker(): boolean {
    return this.#breaker.reset();
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

  /** Flushes what is buffered and waits until every record is durable and its offset committed. */
  async settle(): Promise<void> {
    if (this.#repeats.unsaid) this.#repeats.say();
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

}
