/**
 * Exactly-once at the hand-over: newly assigned partitions stay paused (gate.ts) until the replay
 * check (offsets/replay-check.ts) says which of their records the last owner delivered past its
 * commit; those are skipped when read again, and the partition resumes. The other partitions flow
 * meanwhile. A check that fails is tried again with backoff, 0.5 s doubling to 30 s, unless no
 * retry can help (a topic gone, a grant missing): that stops the worker, as it would at start. The
 * group's answers while it rebalances are answered as Delivery answers a refused commit: tried
 * again after the rejoin, not fatal (they come most during a rolling restart). A check whose
 * partitions were revoked meanwhile is dropped: its generation no longer matches.
 */
import { systemClock, type Clock } from "../time/clock.ts";
import { CdrWorkerError, KafkaError } from "../errors.ts";
import { REBALANCE_REFUSALS } from "../kafka/handle.ts";
import type { TopicPartition } from "../kafka/partition-list.ts";
import { LineLimit, log } from "../log.ts";
import type { Counters } from "../stats/counters.ts";
import type { Gate } from "./gate.ts";
import { payloadOf, type Verdict } from "../cdr/decode.ts";
import { payloadDigest } from "../dlq/provenance-mac.ts";
import type { Delivered } from "./offsets/replay-check.ts";

/** Said as an example, at most ten a minute (replay_envelopes_mismatched counts them all). */
const MISMATCHED_LINE = new LineLimit();

export interface ReplayFinder {
  /**
   * `commitMarks` commits a partition's first mark (offsets/replay-check.ts) as this member's own
   * commits go: through the open transaction, with every other partition's standing position.
   */
  findDelivered(partitions: number[], commitMarks: CommitMarks): Promise<Map<number, Delivered>>;
}

export type CommitMarks = (marks: readonly TopicPartition[]) => Promise<void>;

const RETRY_MS = [500, 30_000] as const;

export class Replays {
  readonly #finder: ReplayFinder;
  readonly #gate: Gate;
  readonly #counters: Counters;
  readonly #onFatal: (e: unknown) => void;
  readonly #onReady: () => void;
  readonly #commitMarks: CommitMarks;
  readonly #started: (partition: number, committed: number) => void;
  readonly #clock: Clock;
  /** Partitions under check, with the check's generation. */
  readonly #checking = new Map<number, number>();
  #checks = 0;
  #stopped = false;
  /** Offsets the last owner delivered, per partition; forgotten past `max`. */
  readonly #delivered = new Map<number, { offsets: Set<number>; max: number; digests?: Map<number, string> }>();
  /**
   * The `since` each check read from, kept while a commit could fall at or before the last offset
   * it skips: such a commit must lead the next owner's check back as far (commitSince).
   */
  readonly #checked = new Map<number, { max: number; since: number; dlqRead: boolean }>();
  /** Per partition, the end (high watermark) below which records the check did not find may be stored. */
  readonly #unsure = new Map<number, number>();
  /**
   * Per partition, the commit the check read: a record below it is durable whatever the consumer's
   * position says. The position comes from the group's commit when the partition was assigned, which
   * a transaction of the last owner's can move past before the check reads it.
   */
  readonly #below = new Map<number, { commit: number; warned: boolean }>();

  constructor(
    finder: ReplayFinder,
    gate: Gate,
    counters: Counters,
    events: {
      onFatal: (e: unknown) => void;
      onReady: () => void;
      commitMarks: CommitMarks;
      /** A partition's committed offset as the check read (or made) it: where its records start. */
      started?: (partition: number, committed: number) => void;
    },
    clock: Clock = systemClock,
  ) {
    this.#clock = clock;
    this.#finder = finder;
    this.#gate = gate;
    this.#counters = counters;
    this.#onFatal = events.onFatal;
    this.#onReady = events.onReady;
    this.#commitMarks = events.commitMarks;
    this.#started = events.started ?? (() => {});
  }

  /** Partitions paused until their check answers. */
  get pending(): number {
    return this.#checking.size;
  }

  /**
   * True once for each offset the last owner delivered: the caller marks it durable and sends it
   * nowhere. The record's decoded text is hashed only where a proven envelope names the SHA-256
   * the record there must have.
   */
  delivered(partition: number, offset: number, record?: Verdict): boolean {
    if (this.#below.size > 0 && this.#belowCommit(partition, offset)) return true;
    if (this.#delivered.size === 0) return false;
    const d = this.#delivered.get(partition);
    if (!d) return false;
    if (offset > d.max) {
      this.#delivered.delete(partition); // past everything found: records gone meanwhile (retention) left it
      return false;
    }
    if (!d.offsets.delete(offset)) return false;
    if (d.offsets.size === 0) this.#delivered.delete(partition);
    const digest = d.digests?.get(offset);
    if (digest !== undefined && record && payloadDigest(payloadOf(record)) !== digest) {
      this.#counters.replayEnvelopesMismatched++;
      const fields = MISMATCHED_LINE.take({ partition, offset });
      const msg = "a DLQ envelope names this record's offset but another payload: the record is processed";
      if (fields) log.warn(msg, fields);
      return false;
    }
    return true;
  }

  #belowCommit(partition: number, offset: number): boolean {
    const below = this.#below.get(partition);
    if (below === undefined) return false;
    if (offset >= below.commit) {
      this.#below.delete(partition); // records come in offset order: none below it follows
      return false;
    }
    // Once a partition: the records from `offset` up to the commit are skipped.
    if (!below.warned) {
      below.warned = true;
      log.warn("records below the commit the replay check read were handed out: skipped, as that commit passes them", {
        partition,
        from: offset,
        committed: below.commit,
      });
    }
    return true;
  }

  /**
   * True for a record its partition's last owner may have stored although the check did not find
   * it: past the commit and below the end the check saw. Its row is looked up before it is sent.
   */
  unsure(partition: number, offset: number): boolean {
    if (this.#unsure.size === 0) return false;
    const below = this.#unsure.get(partition);
    if (below === undefined) return false;
    if (offset < below) return true;
    this.#unsure.delete(partition);
    return false;
  }

  /**
   * The `since` a commit of `partition` at `offset` carries: the tracker's, or the checked one while
   * an offset the last owner delivered lies at or past `offset`. A fresher time would lead the next
   * owner's check past rows the last owner stored long before, and it would store them again.
   */
  commitSince(partition: number, offset: number, since: number): number {
    const c = this.#checked.get(partition);
    if (!c) return since;
    if (offset > c.max) {
      this.#checked.delete(partition);
      return since;
    }
    return Math.min(since, c.since);
  }

  /**
   * Whether a commit of `partition` at `offset` may say that no envelope lies past it (commit-metadata.ts
   * `txn`): not while an offset a check found by reading the DLQ lies at or past it, as the last
   * owner's envelopes there stay visible. Call after commitSince, which forgets what is passed.
   */
  commitTransactional(partition: number, offset: number): boolean {
    const c = this.#checked.get(partition);
    return !(c && c.dlqRead && offset <= c.max);
  }

  check(tps: readonly TopicPartition[]): void {
    if (tps.length === 0) return;
    this.#gate.close(tps, "replay-check");
    const gen = ++this.#checks;
    const partitions = tps.map((t) => t.partition);
    for (const p of partitions) this.#checking.set(p, gen);
    void this.#attempt(tps, gen, 0);
  }

  forget(partitions: readonly TopicPartition[]): void {
    for (const { partition } of partitions) {
      this.#checking.delete(partition);
      this.#delivered.delete(partition);
      this.#checked.delete(partition);
      this.#unsure.delete(partition);
      this.#below.delete(partition);
    }
  }

  stop(): void {
    this.#stopped = true;
  }

  async #attempt(tps: readonly TopicPartition[], gen: number, n: number): Promise<void> {
    const mine = () => tps.map((t) => t.partition).filter((p) => this.#checking.get(p) === gen);
    if (mine().length === 0 || this.#stopped) return;
    const started = this.#clock.mono();
    let found: Map<number, Delivered>;
    try {
      found = await this.#finder.findDelivered(mine(), this.#commitMarks);
    } catch (e) {
      const rebalancing = e instanceof KafkaError && REBALANCE_REFUSALS.has(e.kafkaName ?? "");
      if (e instanceof CdrWorkerError && !e.retryable && !rebalancing) return this.#onFatal(e);
      const delay = Math.min(RETRY_MS[1], RETRY_MS[0] * 2 ** n);
      this.#counters.replayCheckFailures++;
      log.warn("replay check failed; its partitions stay paused and it is tried again", {
        partitions: mine(),
        attempt: n + 1,
        delay_ms: delay,
        err: e as Error,
      });
      this.#clock.setTimeout(() => void this.#attempt(tps, gen, n + 1), delay);
      return;
    }
    const ready = mine();
    let delivered = 0;
    for (const p of ready) {
      this.#checking.delete(p);
      const f = found.get(p);
      if (f?.unsureBelow !== undefined) this.#unsure.set(p, f.unsureBelow);
      if (f?.committed !== undefined) {
        this.#below.set(p, { commit: f.committed, warned: false });
        this.#started(p, f.committed);
      }
      if (!f || f.offsets.size === 0) continue;
      const offsets = f.offsets;
      let max = -1;
      for (const o of offsets) if (o > max) max = o;
      this.#delivered.set(p, { offsets, max, ...(f.digests ? { digests: f.digests } : {}) });
      this.#checked.set(p, { max, since: f.since, dlqRead: !f.transactional });
      delivered += offsets.size;
    }
    this.#counters.replayChecks++;
    log.info("replay check done: what the last owner delivered past its commit is skipped", {
      partitions: ready,
      delivered,
      ms: Math.round(this.#clock.mono() - started),
    });
    this.#gate.open(
      tps.filter((t) => ready.includes(t.partition)),
      "replay-check",
    );
    this.#onReady();
  }
}
