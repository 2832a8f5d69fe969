/**
 * Exactly-once's commits: the DLQ envelopes and the group's offsets in one Kafka transaction, so an
 * envelope becomes visible (to read_committed readers, which every reader of the DLQ is) exactly
 * when the group's commit passes its record, and never for a member the group has fenced (KIP-447).
 *
 * One transaction at a time: envelopes join the open one; a commit closes it to new envelopes,
 * waits for every envelope's delivery report, and only then asks for the positions to commit, so
 * each envelope's record is durable in them. Before it commits, it checks that the offsets pass
 * every envelope of the transaction; where one does not (its partition was lost meanwhile), the
 * transaction is aborted instead. An aborted transaction (refused: a stale generation, a failed
 * send) is a refused commit: its envelopes are produced again, in the next transaction, for the
 * partitions still owned. A transaction the coordinator timed out (open past transaction.timeout.ms,
 * while it could not be reached) fences its producer for good: the producer is made again with the
 * same transactional.id and the envelopes go again in its first transaction. An error no retry can
 * help (fenced by a newer instance of the transactional.id) is thrown: the worker stops.
 */
import type { TopicPartition } from "../../kafka/partition-list.ts";
import type { DeliveryReport, ProduceOptions } from "../../kafka/producer.ts";
import type { KafkaError } from "../../errors.ts";
import { withNonce } from "./commit-metadata.ts";
import { commitNonce, landed, type Unsettled } from "./commit-outcome.ts";
import { TransactionError } from "../../kafka/transaction.ts";
import { log } from "../../log.ts";

/** What the commits run on: kafka/transaction.ts over a transactional Producer, or the simulation's. */
export interface TransactionalProducer<G> {
  init(timeoutMs: number): Promise<void>;
  begin(): void;
  produce(topic: string, value: string | Uint8Array | null, opts?: ProduceOptions): Promise<DeliveryReport>;
  /** Resolves once every record produced has its delivery report. */
  flush(timeoutMs: number): Promise<void>;
  sendOffsets(offsets: readonly TopicPartition[], group: G, timeoutMs: number): Promise<void>;
  commit(timeoutMs: number): Promise<void>;
  abort(timeoutMs: number): Promise<void>;
  /** Gives the producer up: what it still holds is purged, and reported so. */
  close(): void;
}

/** A consumer's group metadata as it stands when taken (kafka/transaction.ts GroupMetadata). */
export interface GroupToken {
  destroy(): void;
}

/** The record an envelope stands for. */
export interface EnvelopeSource {
  partition: number;
  offset: number;
}

interface Produced {
  topic: string;
  value: string | Uint8Array | null;
  opts: ProduceOptions;
  source: EnvelopeSource;
  /** Settled by its first delivery report (or when it is dropped with its partition). */
  delivered: PromiseWithResolvers<DeliveryReport>;
  /** The assignment it was produced under (`abandon` ends one): only envelopes of this one go again. */
  assignment: number;
  /** When it was first sent (opts.now): it goes again after a timeout only within the delivery timeout. */
  firstSentAt?: number;
}

export interface TransactionalCommitsOptions<G extends GroupToken> {
  /** The group's metadata now, for the offsets of one commit (retries send the same). */
  group: () => G;
  /** Whether this member still owns a partition: only their envelopes are produced again after an abort. */
  owns: (partition: number) => boolean;
  /** The raw topic, whose offsets the commits carry. */
  topic: string;
  /** How long one transactional call may take before it counts as failed (transaction.timeout.ms). */
  timeoutMs: number;
  /**
   * A new producer with the same transactional.id, for one the coordinator fenced after timing its
   * transaction out; without it such a fencing stops the worker as any other does.
   */
  renew?: () => TransactionalProducer<G>;
  /** Monotonic milliseconds: how long the open transaction has been open. */
  now?: () => number;
  /**
   * How long an envelope that keeps timing out (message.timeout.ms, each transaction) is sent again
   * before its sender fails: the DLQ producer's message.timeout.ms as configured, else librdkafka's
   * default (300 s), what an envelope gets without transactions. A DLQ topic deleted looks like a
   * broker that does not answer; this bounds the wait.
   */
  deliveryTimeoutMs?: number;
  /**
   * The group's committed offsets of these partitions, read stable (transactional commits
   * settled), with their metadata: how a commit whose outcome the producer never heard is learned
   * (its nonce, commit-metadata.ts) before any of its envelopes is sent again. Without it such a
   * commit counts as aborted.
   */
  committed?: (partitions: readonly number[]) => Promise<readonly TopicPartition[]>;
  /** Waits this long (the simulation's virtual clock); Bun.sleep otherwise. */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * PRODUCER_FENCED, in one line that says what to look at: a newer producer with this transactional.id
 * (another worker with the same WORKER_INSTANCE in the group), or a transaction the coordinator
 * timed out while this worker could not reach it. No retry of this producer can help.
 */
function fencedError(e: TransactionError): TransactionError {
  if (STOPS.has(e)) return e;
  const why =
    "PRODUCER_FENCED: the DLQ producer's transactional.id was taken over (another worker with the same " +
    "WORKER_INSTANCE in this group?) or its transaction outlived transaction.timeout.ms; this worker stops";
  const stop = new TransactionError(`${why}: ${e.message}`, e.kafkaCode ?? 0, "PRODUCER_FENCED", false, false, true);
  STOPS.add(stop);
  return stop;
}

/** The fencings judged final (fencedError): met again on the way out, they are not judged twice. */
const STOPS = new WeakSet<TransactionError>();

/** The assignment of an envelope whose partition was revoked and released (never a current one). */
const RELEASED = -1;

/** How often a commit flushes again while envelopes keep joining its transaction before it closes it. */
const MAX_FLUSHES = 10;

/**
 * Most envelopes one transaction holds. Each stays in memory until its transaction ends (it goes
 * again if the transaction aborts), and under a flood of invalid records envelopes join the open
 * transaction as fast as its commit's flushes catch up: 90,000 of them hold about 150 MiB. Past
 * this, a new envelope waits for the next transaction.
 */
export const MAX_TRANSACTION_ENVELOPES = 10_000;
/** Most bytes of envelopes one transaction holds, for large ones (as the DLQ sends awaited are bounded). */
export const MAX_TRANSACTION_BYTES = 32 << 20;

function sizeOf(value: string | Uint8Array | null): number {
  return value === null ? 0 : value.length;
}

export class TransactionalCommits<G extends GroupToken> {
  #tx: TransactionalProducer<G>;
  readonly #opts: TransactionalCommitsOptions<G>;
  #open = false;
  /** Which transaction is open (counted): a report that arrives after its transaction ended is not this one's. */
  #txn = 0;
  /** A send of the open transaction failed: it cannot commit, and is aborted and sent again. */
  #failed = false;
  /** Envelopes sent so far, counted: a commit flushes again while the count moves. */
  #sent = 0;
  /** Resolved when the commit under way has ended; null while none runs. */
  #committing: Promise<void> | null = null;
  /** Set while the open transaction is closed to new envelopes (its offsets, its end). */
  #ending: Promise<void> | null = null;
  /** The open transaction's envelopes: checked against its offsets, produced again if it aborts. */
  #produced: Produced[] = [];
  /**
   * Envelopes waiting to join a transaction (the open one closed or full), in the order they came,
   * and admitted in it: an envelope ahead of an earlier one of its partition would lie past the
   * commit, which stops at the earlier one, and the transaction would abort again and again.
   */
  readonly #waiting: Array<{ go: () => void; bytes: number }> = [];
  /** Admitted from #waiting and not yet in #produced: room already promised to them, and their bytes. */
  #admitted = 0;
  #admittedBytes = 0;
  /** The bytes of #produced's envelopes (a string's length), kept with it (#setProduced). */
  #producedBytes = 0;
  #refusal = "";
  /** Counts the assignments lost (abandon): an envelope of an earlier one is never sent again. */
  #assignment = 0;
  /** When the open transaction was begun (opts.now): one open past the timeout may be the coordinator's to end. */
  #openedAt = 0;
  readonly #now: () => number;
  /** Producers made again after a timed-out transaction fenced the one before. */
  #renewals = 0;

  constructor(tx: TransactionalProducer<G>, opts: TransactionalCommitsOptions<G>) {
    this.#tx = tx;
    this.#opts = opts;
    this.#now = opts.now ?? (() => performance.now());
  }

  /** How many times the producer was made again after the coordinator timed out its transaction. */
  get renewals(): number {
    return this.#renewals;
  }

  /**
   * Why the last commit that returned false was refused: the coordinator's code (ILLEGAL_GENERATION,
   * UNKNOWN_MEMBER_ID, …), DLQ_SEND_PURGED, PARTITIONS_LOST, or ENVELOPE_PAST_COMMIT.
   */
  get refusal(): string {
    return this.#refusal;
  }

  /** Registers the transactional.id, fencing its earlier holders and ending what they left open. */
  init(): Promise<void> {
    return this.#persist("init", () => this.#tx.init(Math.max(60_000, this.#opts.timeoutMs)));
  }

  /**
   * One envelope into the open transaction (the next one once the commit under way has closed it);
   * resolves on its first delivery report. One whose transaction aborts is sent again in the next
   * while its partition is owned: it becomes visible with the commit of a transaction, or never.
   * Rejects when librdkafka could not deliver it (its own retries ran out), as a plain producer does.
   */
  async produce(
    topic: string,
    value: string | Uint8Array | null,
    opts: ProduceOptions,
    source: EnvelopeSource,
  ): Promise<DeliveryReport> {
    const assignment = this.#assignment;
    // Joins at once where it can: a send goes out in the same turn as its call.
    if (this.#waiting.length > 0 || this.#admitted > 0 || !this.#hasRoom()) await this.#turn(sizeOf(value));
    const delivered = Promise.withResolvers<DeliveryReport>();
    const entry: Produced = { topic, value, opts, source, delivered, assignment };
    // Its assignment was lost while it waited for the transaction: the record is its next owner's.
    if (assignment !== this.#assignment) {
      this.#drop([entry]);
      return delivered.promise;
    }
    this.#begin();
    this.#produced.push(entry);
    this.#producedBytes += sizeOf(entry.value);
    this.#send(entry);
    // In: the next in line may follow, room allowing.
    if (this.#waiting.length > 0) this.#admit();
    return entry.delivered.promise;
  }

  /**
   * Commits the open transaction (one is begun when none is open) with the offsets `positions`
   * gives once every envelope is delivered. False when the group refused them or a send failed:
   * the transaction was aborted and nothing of it counts; its envelopes are produced again.
   */
  async commit(positions: () => TopicPartition[]): Promise<boolean> {
    while (this.#committing) await this.#committing;
    const done = Promise.withResolvers<void>();
    this.#committing = done.promise;
    try {
      return await this.#commit(positions);
    } finally {
      this.#committing = null;
      done.resolve();
    }
  }

  /**
   * The assignment was lost: none of the envelopes produced so far is produced again, even for a
   * partition that comes back (its next owner's check decides), and the open transaction is aborted
   * once the commit under way, if any, has ended.
   */
  async abandon(): Promise<void> {
    this.#assignment++;
    while (this.#committing) await this.#committing;
    if (!this.#open) return;
    const done = Promise.withResolvers<void>();
    this.#committing = done.promise;
    try {
      await this.#closed(async () => {
        const earlier = this.#produced.filter((p) => p.assignment !== this.#assignment);
        this.#drop(earlier);
        this.#setProduced(this.#produced.filter((p) => !earlier.includes(p)));
        await this.#abortAndRequeue();
      });
    } finally {
      this.#committing = null;
      done.resolve();
    }
  }

  /**
   * Revoked partitions given up after their revocation settled without a commit (the group refused
   * it: the member had been removed meanwhile). An envelope of theirs still in the open transaction,
   * sent again there after an abort while they were owned, must never show: their next owner, this
   * worker included, checks the DLQ (where it is not) and dead-letters the record again. Marked as
   * of an earlier assignment, it is dropped, and the transaction aborted, by the next commit or
   * abandon, as an envelope of a lost assignment is.
   */
  release(partitions: readonly number[]): void {
    const gone = new Set(partitions);
    for (const p of this.#produced) if (gone.has(p.source.partition)) p.assignment = RELEASED;
  }

  async #commit(positions: () => TopicPartition[]): Promise<boolean> {
    const { timeoutMs } = this.#opts;
    this.#begin();
    // Envelopes may still join while the reports come in: one whose record became sendable when an
    // earlier batch's report arrived (delivery/offsets/tracker.ts whenReached) goes in this one.
    for (let i = 0; i < MAX_FLUSHES; i++) {
      const sent = this.#sent;
      // Reports still outstanding at the timeout (a broker not answering): the commit's own flush
      // waits for them, and is asked again while it times out.
      await this.#tx.flush(timeoutMs).catch(() => {});
      // The reports' own continuations (a hold marked done, the next envelope sent) run first.
      await new Promise<void>((r) => setImmediate(r));
      if (this.#sent === sent) break;
    }
    // Told apart from every other commit of the group's offsets by this nonce (commit-outcome.ts).
    const nonce = commitNonce();
    let carried: TopicPartition[] = [];
    return this.#closed(async () => {
      let group: G | null = null;
      try {
        if (this.#produced.some((p) => p.assignment !== this.#assignment)) {
          // Envelopes of an assignment lost since they were sent: this commit (the next assignment's,
          // or its replay check's) came before the abandon that would abort them. Committed, they
          // would show past the check the next owner has already run, which dead-letters their
          // records again. Aborted instead; the current assignment's go again.
          this.#refusal = "PARTITIONS_LOST";
          const earlier = this.#produced.filter((p) => p.assignment !== this.#assignment);
          this.#drop(earlier);
          this.#setProduced(this.#produced.filter((p) => !earlier.includes(p)));
          log.warn("the transaction holds envelopes of a lost assignment: it is aborted, not committed", {
            envelopes: earlier.length,
          });
          await this.#abortAndRequeue();
          return false;
        }
        if (this.#failed) {
          this.#refusal = "DLQ_SEND_PURGED";
          log.warn("a DLQ send of the transaction failed: it is aborted and its envelopes go again", {
            envelopes: this.#produced.length,
          });
          await this.#abortAndRequeue();
          return false;
        }
        const offsets = withNonce(positions(), nonce);
        const behind = this.#behind(offsets);
        if (behind.length > 0) {
          // A partition lost meanwhile (its tracker forgotten): the abandon that follows drops them.
          // Anything else would be a hole in the ordering, which the abort keeps from showing.
          const partitions = [...new Set(behind.map((b) => b.source.partition))];
          const lost = partitions.every((p) => !this.#opts.owns(p));
          this.#refusal = lost ? "PARTITIONS_LOST" : "ENVELOPE_PAST_COMMIT";
          const line = "an envelope lies past its partition's commit: its transaction is aborted, not committed";
          if (lost) log.warn(`${line} (its partition was lost)`, { partitions });
          else log.error(line, { partitions });
          await this.#abortAndRequeue();
          return false;
        }
        const g = (group = this.#opts.group());
        if (offsets.length > 0) await this.#persist("send offsets", () => this.#tx.sendOffsets(offsets, g, timeoutMs));
        // From here the coordinator may write the commit whatever this producer hears of it.
        carried = offsets;
        await this.#persist("commit", () => this.#tx.commit(timeoutMs));
        this.#ended();
        this.#setProduced([]);
        return true;
      } catch (e) {
        if (e instanceof TransactionError && e.fatal) {
          if (await this.#renewAfter(e, carried.length > 0 ? { offsets: carried, nonce } : null)) return true;
          this.#refusal = "TRANSACTION_TIMED_OUT";
          return false;
        }
        if (!(e instanceof TransactionError) || !e.abortable) throw e;
        this.#refusal = e.kafkaName ?? "TRANSACTION_ABORTED";
        log.warn("transaction refused and aborted; its envelopes go again for the partitions still owned", {
          code: e.kafkaName,
          envelopes: this.#produced.length,
        });
        await this.#abortAndRequeue();
        return false;
      } finally {
        group?.destroy();
      }
    });
  }

  /** Runs `fn` with the open transaction closed to new envelopes; they wait for the next one. */
  async #closed<T>(fn: () => Promise<T>): Promise<T> {
    const ended = Promise.withResolvers<void>();
    this.#ending = ended.promise;
    try {
      return await fn();
    } finally {
      this.#ending = null;
      ended.resolve();
      this.#admit();
    }
  }

  /** Whether the open transaction takes another envelope now. */
  #hasRoom(): boolean {
    return (
      !this.#ending &&
      this.#produced.length + this.#admitted < MAX_TRANSACTION_ENVELOPES &&
      this.#producedBytes + this.#admittedBytes < MAX_TRANSACTION_BYTES
    );
  }

  #setProduced(list: Produced[]): void {
    this.#produced = list;
    this.#producedBytes = list.reduce((n, p) => n + sizeOf(p.value), 0);
  }

  /** Resolves when this envelope may join the open transaction, in its turn. */
  async #turn(bytes: number): Promise<void> {
    await new Promise<void>((go) => this.#waiting.push({ go, bytes }));
    this.#admitted--;
    this.#admittedBytes -= bytes;
    // Admitted, then a commit closed the transaction before this ran: the next one, in order.
    while (this.#ending) await this.#ending;
  }

  /** Lets the waiting envelopes in, first come first, while the open transaction has room. */
  #admit(): void {
    while (this.#waiting.length > 0 && this.#hasRoom()) {
      const next = this.#waiting.shift()!;
      this.#admitted++;
      this.#admittedBytes += next.bytes;
      next.go();
    }
  }

  /** Envelopes of the open transaction whose record the offsets do not pass. */
  #behind(offsets: readonly TopicPartition[]): Produced[] {
    if (this.#produced.length === 0) return [];
    const at = new Map<number, number>();
    for (const o of offsets) if (o.offset !== undefined) at.set(o.partition, Number(o.offset));
    return this.#produced.filter((p) => !((at.get(p.source.partition) ?? -1) > p.source.offset));
  }

  async #abortAndRequeue(): Promise<void> {
    const owned = this.#keepOwned();
    await this.#abort();
    this.#requeue(owned);
  }

  /** The open transaction's envelopes of the current assignment's owned partitions; the rest dropped. */
  #keepOwned(): Produced[] {
    const current = (p: Produced) => p.assignment === this.#assignment && this.#opts.owns(p.source.partition);
    const owned = this.#produced.filter(current);
    this.#drop(this.#produced.filter((p) => !owned.includes(p)));
    this.#setProduced([]);
    return owned;
  }

  #requeue(owned: readonly Produced[]): void {
    if (owned.length === 0) return;
    this.#begin();
    for (const p of owned) {
      this.#produced.push(p);
      this.#producedBytes += sizeOf(p.value);
      this.#send(p);
    }
  }

  /**
   * The producer failed for good (librdkafka: fatal). Fenced where its transaction had been open
   * past the timeout: the coordinator ended it (a new epoch) while the worker could not reach it,
   * and the fencing says nothing of another instance. Fatal otherwise (seen: INVALID_TXN_STATE on
   * the abort after a broker's restart): the coordinator ends what it left open. Either way the
   * producer is made again (its init fences nothing but this one's remains) and the transaction's
   * envelopes go again for the partitions still owned. A fencing within the timeout is a newer
   * instance of the transactional.id: the worker stops.
   */
  /**
   * Makes the producer again after it failed for good. When the failure came after the commit was
   * asked (`unknown`: its offsets and nonce), the coordinator may have written the commit: the new
   * producer's init completes or aborts it, and the group's offsets then say which. Committed, the
   * envelopes are not sent again and this returns true; otherwise they go again, as after an abort.
   */
  async #renewAfter(e: TransactionError, unknown: Unsettled | null): Promise<boolean> {
    const open = this.#open ? this.#now() - this.#openedAt : 0;
    if (STOPS.has(e) || (e.fenced && open < this.#opts.timeoutMs)) throw fencedError(e);
    if (!this.#opts.renew) throw e.fenced ? fencedError(e) : e;
    log.warn("the DLQ producer failed for good: it is made again", {
      code: e.kafkaName,
      open_ms: Math.round(open),
      envelopes: this.#produced.length,
      outcome: unknown ? "unknown: the commit was asked" : "aborted",
    });
    const owned = this.#keepOwned();
    // Reports the old producer still owes are for an ended transaction: #send ignores them.
    this.#ended();
    const old = this.#tx;
    this.#tx = this.#opts.renew();
    old.close();
    this.#renewals++;
    await this.init();
    const read = this.#opts.committed;
    if (unknown && read && (await landed(read, unknown, this.#opts.sleep ?? Bun.sleep))) {
      log.warn("the transaction whose answer was lost committed: its envelopes are not sent again", {
        envelopes: owned.length,
      });
      this.#setProduced([]);
      return true;
    }
    this.#requeue(owned);
    return false;
  }

  #send(entry: Produced): void {
    const txn = this.#txn;
    this.#sent++;
    entry.firstSentAt ??= this.#now();
    this.#tx.produce(entry.topic, entry.value, entry.opts).then(
      (report) => entry.delivered.resolve(report),
      (e: unknown) => {
        // Its transaction has ended since: the envelope went again in a later one, or was dropped.
        if (txn !== this.#txn) return;
        // Purged by an abort, timed out (the broker unreachable past message.timeout.ms), or its
        // producer fenced: the transaction cannot commit; aborted, its envelopes go again, and a
        // copy the broker did write stays unseen.
        const first = !this.#failed;
        this.#failed = true;
        const name = (e as KafkaError)?.kafkaName ?? "";
        const waited = this.#now() - entry.firstSentAt!;
        const limit = (this.#opts.deliveryTimeoutMs ?? DELIVERY_TIMEOUT_MS) - TIMER_SLACK_MS;
        const expired = name === "_MSG_TIMED_OUT" && waited >= limit;
        if (TRANSACTION_SCOPED.has(name) && !expired) {
          if (first) void this.#abortFailed();
          return;
        }
        // The envelope refused, or undelivered for the whole delivery timeout (the DLQ topic gone?):
        // its sender fails, and the worker stops, as without transactions.
        entry.delivered.reject(e);
      },
    );
  }

  /**
   * A send of the open transaction failed. Its sender waits for a report, so its record's hold, and
   * every commit past it, wait too: no commit may come to abort the transaction. So it is aborted
   * here, once the commit under way (which may abort it itself) has ended, and its envelopes go
   * again. Where no retry can help (fenced within the timeout), every envelope's sender fails and
   * the worker stops.
   */
  async #abortFailed(): Promise<void> {
    while (this.#committing) await this.#committing;
    if (!this.#failed) return;
    const done = Promise.withResolvers<void>();
    this.#committing = done.promise;
    const envelopes = [...this.#produced];
    try {
      await this.#closed(async () => {
        this.#refusal = "DLQ_SEND_PURGED";
        log.warn("a DLQ send of the transaction failed: it is aborted and its envelopes go again", {
          envelopes: envelopes.length,
        });
        await this.#abortAndRequeue();
      });
    } catch (e) {
      for (const p of envelopes) p.delivered.reject(e);
    } finally {
      this.#committing = null;
      done.resolve();
    }
  }

  /**
   * Envelopes of partitions no longer owned: never sent again; their senders hear no error, as the
   * records are the next owner's.
   */
  #drop(entries: readonly Produced[]): void {
    for (const p of entries) p.delivered.resolve({ partition: -1, offset: -1 });
  }

  async #abort(): Promise<void> {
    try {
      await this.#persist("abort", () => this.#tx.abort(this.#opts.timeoutMs));
    } catch (e) {
      if (!(e instanceof TransactionError) || !e.fatal) throw e;
      // Timed out by the coordinator: it was aborted there; the caller sends the envelopes again.
      await this.#renewAfter(e, null);
      return;
    }
    this.#ended();
  }

  /**
   * A call made again while it fails with an error a retry can help (the coordinator slow or
   * unreachable): commit and abort resume, offsets are sent again with the same metadata. Meanwhile
   * no envelope joins and no insert is admitted past the lease; the coordinator times out a
   * transaction left open too long, and the producer hears it as fenced.
   */
  async #persist(what: string, call: () => Promise<void>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (e) {
        if (!(e instanceof TransactionError) || !e.retryable || e.abortable || e.fatal) throw e;
        if (attempt === 1 || attempt % 10 === 0)
          log.warn(`transaction ${what} not answered in time; trying again`, { attempt, code: e.kafkaName });
      }
    }
  }

  #begin(): void {
    if (this.#open) return;
    this.#tx.begin();
    this.#open = true;
    this.#openedAt = this.#now();
  }

  #ended(): void {
    this.#open = false;
    this.#failed = false;
    this.#txn++;
  }
}

/** librdkafka's default message.timeout.ms: how long an envelope is tried without transactions. */
const DELIVERY_TIMEOUT_MS = 300_000;

/** librdkafka's timer and this one's clock differ by this much at most: a timeout seen a hair early is not. */
const TIMER_SLACK_MS = 100;

/**
 * Delivery reports that fail the transaction, not the envelope: taken back by an abort, timed out,
 * or the producer fenced or closed. Another transaction (or producer) can deliver it.
 */
const TRANSACTION_SCOPED = new Set([
  "_PURGE_QUEUE",
  "_PURGE_INFLIGHT",
  "_MSG_TIMED_OUT",
  "_FENCED",
  "_STATE",
  "_DESTROY",
]);
