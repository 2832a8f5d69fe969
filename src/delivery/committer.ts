/**
 * Commits the positions the tracker hands out (offsets/commit-scheduler.ts): through the consumer
 * under at-least-once, through the transaction with its DLQ envelopes under exactly-once. Each
 * position carries what the partition's next owner needs to skip what was delivered past it
 * (offsets/commit-metadata.ts). A commit the group refuses while it rebalances is handed out again;
 * any other failure is the caller's (fatal).
 */
import type { Clock } from "../time/clock.ts";
import { KafkaError } from "../errors.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import { REBALANCE_REFUSALS } from "../kafka/handle.ts";
import type { TopicPartition } from "../kafka/partition-list.ts";
import { log } from "../log.ts";
import type { Counters } from "../stats/counters.ts";
import { commitMetadata } from "./offsets/commit-metadata.ts";
import type { Advanced, OffsetTracker } from "./offsets/tracker.ts";
import type { GroupToken, TransactionalCommits } from "./offsets/transactional-commits.ts";
import type { Replays } from "./replays.ts";

/** Pause before a refused commit is sent again: the rebalance needs the poll loop meanwhile. */
const COMMIT_RETRY_MS = 500;

export interface CommitterDeps {
  topic: string;
  consumer: GroupConsumer;
  counters: Counters;
  tracker: OffsetTracker;
  clock: Clock;
  /** Exactly-once: commits go through the transaction with the envelopes they pass. */
  transactions?: TransactionalCommits<GroupToken> | undefined;
  /** Exactly-once: the replay check, which says what each commit's metadata carries. */
  replays: () => Replays | null;
  /** The current assignment's signal: aborted once it is lost. */
  epoch: () => AbortSignal;
  /** Asks the commit scheduler for a commit of what advanced. */
  schedule: () => void;
}

export class Committer {
  readonly #deps: CommitterDeps;

  constructor(deps: CommitterDeps) {
    this.#deps = deps;
  }

  /**
   * A commit the group refuses because it is rebalancing (REBALANCE_IN_PROGRESS; after a session or
   * coordinator loss UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION; under KIP-848 STALE_MEMBER_EPOCH or
   * FENCED_MEMBER_EPOCH) advanced nothing and is no commit failure: the partitions may have moved.
   * Nor does one a later attempt gets past (a retryable error: the coordinator loading its groups
   * after a broker restart, moving, or not answering in time). Their positions are handed out again
   * after COMMIT_RETRY_MS for the partitions still owned; a partition revoked meanwhile is reset on
   * release, so its records replay at the next owner. Every other failure is thrown (fatal).
   */
  async commit(positions: Advanced[]): Promise<boolean> {
    const { consumer, counters, transactions, tracker, clock } = this.#deps;
    // The assignment the positions were handed out under.
    const signal = this.#deps.epoch();
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
    tracker.confirm(sent);
    counters.commits++;
    counters.lastCommitAt = clock.now();
    return true;
  }

  /**
   * The replay check's first marks (partitions whose commit carries no metadata), committed as
   * this member's own commits are: through the transaction, with every other partition's standing
   * position. The open transaction may hold envelopes of those partitions; a commit of the marks
   * alone would leave them past their commit, abort, and do so again at every try.
   */
  async commitMarks(marks: readonly TopicPartition[]): Promise<void> {
    const { transactions, tracker } = this.#deps;
    if (!transactions) throw new Error("the replay check's marks need exactly-once's transactions");
    const marked = new Set(marks.map((m) => m.partition));
    let standing: Advanced[] = [];
    const committed = await transactions.commit(() => {
      standing = this.#inTransaction([]).filter((p) => !marked.has(p.partition));
      return [...marks, ...this.#offsets(standing, true)];
    });
    if (!committed) {
      tracker.refused(standing);
      const refusal = transactions.refusal;
      throw new KafkaError("KAFKA_COMMIT", "the replay check's commit was refused", undefined, refusal, true);
    }
    tracker.confirm(standing);
  }

  /** The positions handed out, and every other partition's as it stands now (newer wins). */
  #inTransaction(positions: readonly Advanced[]): Advanced[] {
    const { tracker, clock } = this.#deps;
    const now = clock.now();
    tracker.advanced(now);
    const all = new Map(positions.map((p) => [p.partition, p]));
    for (const p of tracker.standing(now)) all.set(p.partition, p);
    return [...all.values()];
  }

  #offsets(positions: readonly Advanced[], transactional: boolean): TopicPartition[] {
    const replays = this.#deps.replays();
    return positions.map(({ partition, offset, since }) => ({
      topic: this.#deps.topic,
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
    this.#deps.clock.setTimeout(
      () => {
        this.#deps.tracker.refused(positions);
        this.#deps.schedule();
      },
      COMMIT_RETRY_MS,
      { unref: true },
    );
  }
}
