/**
 * Fills the DLQ table from the committed DLQ (read_committed): consume → row → insert → commit, each
 * record exactly once. The table holds its own position: a partition's next offset is its largest
 * stored DLQ offset plus one, read when the partition is assigned and again after an insert whose
 * answer was lost (once that insert has been ended on the server), so neither a kill -9 between an
 * insert and its commit nor a lost answer stores a record twice. That holds because every insert is
 * one DLQ partition's rows, sent in offset order, one at a time, with one `stored_at` (one daily
 * partition, one part): it lands whole or not at all. The group's committed offsets only say how far
 * the filler got (lag); they never decide what is stored.
 *
 * It never dead-letters: when ClickHouse fails or refuses, the insert is tried again after a delay
 * that grows to RETRY_MAX_MS, while the loop goes on polling (the group keeps the member) and
 * buffering up to `maxBufferedBytes` (past it, consumption pauses). Inserts go only within the
 * membership lease (delivery/membership.ts): a filler cut off from its group stops sending before
 * another can be given its partitions, and a revocation waits for an insert in flight to end.
 */
import { MembershipLease, type LeaseTerms } from "../kafka/membership.ts";
import type { Consumer } from "../kafka/consumer.ts";
import type { TopicPartition } from "../kafka/partition-list.ts";
import type { Message } from "../kafka/message.ts";
import { CdrWorkerError } from "../errors.ts";
import { LineLimit, log } from "../log.ts";
import { classifyInsertError } from "../clickhouse/insert-error.ts";
import { dateTimeText, dlqRow, refusedRow, rowBytes, type DlqRow, type RowContext } from "./row.ts";
import type { DlqStore } from "./store.ts";

/** Anyone who may write to the DLQ topic chooses how many rows the server refuses: said ten times a minute. */
const REFUSED_LINE = new LineLimit();

export type FillerConsumer = Pick<
  Consumer,
  | "takeAssigned"
  | "pendingRevoke"
  | "completeRevoke"
  | "poll"
  | "pause"
  | "resume"
  | "commit"
  | "waitForMessages"
  | "wake"
  | "onStanding"
  | "close"
  | "watermarks"
  | "positions"
>;

export interface FillerOptions {
  topic: string;
  /** An insert is due at this many rows (BATCH_SIZE), and at most this many payload bytes go in one. */
  batchRows: number;
  batchBytes: number;
  /**
   * Most rows one insert carries when more than batchRows wait (rows read while the last insert
   * ran: a backlog), as the worker's BATCH_BACKLOG_ROWS: fewer, larger inserts and commits exactly
   * when the filler is behind. batchRows when not given.
   */
  backlogRows?: number;
  /** A partition's rows go once this old, however few. */
  flushIntervalMs: number;
  /** Rows read and not yet stored, in payload bytes, past which consumption pauses. */
  maxBufferedBytes: number;
  /** Longest an insert's request may take. */
  requestTimeoutMs: number;
  lease: LeaseTerms;
  row: Omit<RowContext, "storedAt">;
  /** How long a stop may take to store what was read. */
  drainTimeoutMs: number;
  /**
   * The topic's committed record at an offset; "gone" below the low watermark (retention), null when
   * it has none there. Checks, at each assignment, that the table was filled from this topic.
   */
  recordAt?: (partition: number, offset: number) => Promise<Message | "gone" | null>;
  /** A prefix that tells this process's inserts apart (query ids). */
  instance: string;
}

/** The DLQ table holds another record at a DLQ offset than the topic: it was filled from another topic. */
export class TopicMismatchError extends CdrWorkerError {
  constructor(topic: string, partition: number, offset: number) {
    super(
      "TOPOLOGY",
      `the DLQ table holds a row at ${topic} partition ${partition} offset ${offset}, and the topic has no ` +
        "committed record there or one of another payload: was the " +
        "topic made anew? Its rows name offsets the new topic uses again; move them aside (rename the table, " +
        "then `cdr-worker migrate`) before filling it from this topic",
    );
  }
}

const RETRY_FIRST_MS = 200;
export const RETRY_MAX_MS = 10_000;
const IDLE_WAIT_MS = 50;
/** How long a stop waits for the last commit of the filler's position (advisory: the table is the position). */
const COMMIT_ON_STOP_MS = 5_000;
const PROGRESS_EVERY_MS = 10_000;

interface Buffer {
  rows: DlqRow[];
  /** Each row's rowBytes, counted once as it is read. */
  sizes: number[];
  /** Their sum. */
  bytes: number;
  since: number;
}

interface Insert {
  partition: number;
  abort: AbortController;
  done: Promise<void>;
}

export interface FillerCounts {
  /** Records read that became rows (stored, or waiting to be). */
  read: number;
  stored: number;
  /** Rows the server refused alone, each stored as a row that says so in its place (refusedRow). */
  refused: number;
  /** Rows stored whose record was not an envelope, or had a field mended (their `unreadable` says why). */
  unreadable: number;
  skipped: number;
  inserts: number;
  failedInserts: number;
  lostAnswers: number;
}

export class DlqFiller {
  readonly #consumer: FillerConsumer;
  readonly #store: DlqStore;
  readonly #opts: FillerOptions;
  readonly #lease: MembershipLease;
  /** Owned partitions whose position is known: the next offset to store. */
  readonly #next = new Map<number, number>();
  /** Owned partitions whose position is being read (paused meanwhile). */
  readonly #reading = new Map<number, Promise<void>>();
  readonly #buffers = new Map<number, Buffer>();
  /** What each row is made with. Its stored_at is the insert's to set (#storeRows): none is read here. */
  readonly #rowContext: RowContext;
  #buffered = 0;
  #paused = false;
  #insert: Insert | null = null;
  #committed = new Map<number, number>();
  /** The last commit sent: the consumer's commits settle in order, so this one settles after all. */
  #lastCommit: Promise<unknown> = Promise.resolve();
  #stopRequested = false;
  #fatal: Error | null = null;
  #seq = 0;
  #lastProgress = performance.now();
  /** Monotonic ms of the loop's last pass: /healthz fails once it is old. */
  lastPass = performance.now();
  readonly counts: FillerCounts = {
    read: 0, stored: 0, refused: 0, unreadable: 0, skipped: 0, inserts: 0, failedInserts: 0, lostAnswers: 0,
  };
  /** Per owned partition, when (monotonic ms) the table last held every record the topic had, or it was assigned. */
  readonly #caughtUp = new Map<number, number>();

  constructor(consumer: FillerConsumer, store: DlqStore, opts: FillerOptions) {
    this.#consumer = consumer;
    this.#store = store;
    this.#opts = opts;
    this.#rowContext = { ...opts.row, storedAt: 0 };
    this.#lease = new MembershipLease(opts.lease);
    consumer.onStanding((s) => this.#lease.stand(s));
  }

  stop(): void {
    this.#stopRequested = true;
    this.#consumer.wake();
  }

  /** Bytes of rows read and not yet stored. */
  get buffered(): number {
    return this.#buffered;
  }

  /**
   * How far the table stands behind the DLQ topic, per owned partition whose position is known: the
   * offsets past it (the topic's end as the consumer last fetched it), and the seconds since the
   * table last held every record (or since the partition was assigned here). With nothing read
   * waiting, the position is the consumer's: past the transaction markers after the last envelope,
   * which no row stands for.
   */
  lag(now = performance.now()): Array<{ partition: number; records: number; seconds: number }> {
    const out: Array<{ partition: number; records: number; seconds: number }> = [];
    const { topic } = this.#opts;
    for (const [partition, next] of this.#next) {
      const high = this.#consumer.watermarks(topic, partition)?.high;
      if (high === undefined) continue;
      const waiting = (this.#buffers.get(partition)?.rows.length ?? 0) > 0 || this.#insert?.partition === partition;
      const read = waiting ? -1 : Number(this.#consumer.positions([{ topic, partition }])[0]?.offset ?? -1);
      const records = Math.max(0, high - Math.max(next, read));
      if (records === 0 || !this.#caughtUp.has(partition)) this.#caughtUp.set(partition, now);
      const seconds = records === 0 ? 0 : Math.round(now - this.#caughtUp.get(partition)!) / 1000;
      out.push({ partition, records, seconds });
    }
    return out;
  }

  /** Each owned partition's next offset to store, as the table holds it. */
  get positions(): ReadonlyMap<number, number> {
    return this.#next;
  }

  async run(): Promise<void> {
    while (!this.#stopRequested && !this.#fatal) {
      this.lastPass = performance.now();
      for (const assigned of this.#consumer.takeAssigned()) this.#assigned(assigned);
      if (this.#consumer.pendingRevoke) {
        await this.#revoke(this.#consumer.pendingRevoke);
        continue;
      }
      const messages = this.#consumer.poll(512);
      for (const m of messages) this.#take(m);
      this.#flushDue(false);
      this.#backpressure();
      this.#progress();
      if (messages.length === 0) await this.#consumer.waitForMessages(IDLE_WAIT_MS);
    }
    if (!this.#fatal) await this.#drain();
    if (this.#fatal) throw this.#fatal;
    // Closing abandons a commit in flight: the group would say the filler stands short of what it
    // stored, and `audit`, which checks the table up to that offset, would check less than there is.
    await settledWithin(this.#lastCommit, COMMIT_ON_STOP_MS);
    await this.#consumer.close();
  }

  /**
   * New partitions: paused until the table says where each stands, and that the record there is the
   * one the table holds: a DLQ topic made anew starts its offsets again, and the rows at them would
   * make the filler skip records it never stored.
   */
  #assigned(partitions: readonly TopicPartition[]): void {
    const ps = partitions.map((t) => t.partition);
    const what = `reading the DLQ table's position of partitions ${ps.join(",")}`;
    const read = this.#retrying(what, undefined, async () => {
      const positions = await this.#store.positions(ps);
      for (const [p, at] of positions) await this.#sameRecord(p, at);
      return positions;
    }).then((positions) => {
      if (positions === null) return;
      const resumed: TopicPartition[] = [];
      for (const p of ps) {
        if (!this.#reading.has(p)) continue; // revoked meanwhile
        this.#reading.delete(p);
        this.#next.set(p, (positions.get(p) ?? -1) + 1);
        resumed.push({ topic: this.#opts.topic, partition: p });
      }
      log.info("DLQ table: partitions assigned; stored through", {
        positions: Object.fromEntries(ps.map((p) => [p, (positions.get(p) ?? -1)])),
      });
      if (resumed.length && !this.#paused) this.#consumer.resume(resumed);
      this.#consumer.wake();
    }, (e) => {
      this.#fatal = e instanceof Error ? e : new Error(String(e));
      this.#consumer.wake();
    });
    for (const p of ps) this.#reading.set(p, read);
  }

  /**
   * Throws a TopicMismatchError (fatal: no retry helps) when the topic's record at `offset` is not
   * the one the table stored there; passes when the topic no longer keeps it (retention).
   */
  async #sameRecord(partition: number, offset: number): Promise<void> {
    const { recordAt } = this.#opts;
    if (!recordAt) return;
    const [m, stored] = await Promise.all([recordAt(partition, offset), this.#store.digestAt(partition, offset)]);
    if (m === "gone" || stored === null) return;
    const found = m === null ? null : dlqRow(m, { storedAt: 0 }).payload_sha256;
    if (found !== stored) throw new TopicMismatchError(this.#opts.topic, partition, offset);
  }

  #take(m: Message): void {
    const next = this.#next.get(m.partition);
    if (next === undefined) return; // not ours (any more): the next owner reads it
    if (m.offset < next) {
      this.counts.skipped++; // stored before the last commit: the table is the position
      return;
    }
    const row = dlqRow(m, this.#rowContext);
    this.counts.read++;
    let b = this.#buffers.get(m.partition);
    if (!b) this.#buffers.set(m.partition, (b = { rows: [], sizes: [], bytes: 0, since: performance.now() }));
    const bytes = rowBytes(row);
    b.rows.push(row);
    b.sizes.push(bytes);
    b.bytes += bytes;
    this.#buffered += bytes;
  }

  /** Starts the next insert when none runs: the fullest due partition's first rows. */
  #flushDue(all: boolean): void {
    if (this.#insert) return;
    const now = performance.now();
    for (const [p, b] of this.#buffers) {
      if (b.rows.length === 0) continue;
      const { batchRows, batchBytes, flushIntervalMs } = this.#opts;
      const due = all || b.rows.length >= batchRows || b.bytes >= batchBytes || now - b.since >= flushIntervalMs;
      if (!due) continue;
      let n = 0, bytes = 0;
      const most = Math.max(batchRows, this.#opts.backlogRows ?? batchRows);
      while (n < b.rows.length && n < most && (n === 0 || bytes < batchBytes))
        bytes += b.sizes[n++]!;
      const rows = b.rows.splice(0, n);
      b.sizes.splice(0, n);
      b.bytes -= bytes;
      b.since = now;
      this.#startInsert(p, rows, bytes);
      return;
    }
  }

  #startInsert(partition: number, rows: DlqRow[], bytes: number): void {
    const abort = new AbortController();
    const done = this.#storeRows(partition, rows, abort.signal).then(
      (stored) => {
        this.#buffered -= bytes;
        if (stored === null) return;
        this.#next.set(partition, stored + 1);
        this.#commit(partition, stored + 1);
      },
      (e) => {
        this.#fatal = e instanceof Error ? e : new Error(String(e));
      },
    ).finally(() => {
      this.#insert = null;
      this.#consumer.wake();
    });
    this.#insert = { partition, abort, done };
  }

  /**
   * Stores the rows, tried until they are or `signal` aborts (the partition was revoked). After a
   * failure that may have stored them, the insert is ended and the position read again: only the
   * rows past it go. Resolves to the last offset stored, or null when aborted.
   */
  async #storeRows(partition: number, rows: DlqRow[], signal: AbortSignal, inPlace = false): Promise<number | null> {
    const last = rows[rows.length - 1]!.dlq_offset;
    let unsure: string | null = null;
    /** The server's words for rows it refused: what is not stored of them is isolated. */
    let refusal: string | null = null;
    let delay = RETRY_FIRST_MS;
    for (;;) {
      if (signal.aborted) return null;
      try {
        if (unsure !== null) {
          await this.#store.endInsert(unsure);
          const at = (await this.#store.positions([partition])).get(partition) ?? -1;
          const left = rows.filter((r) => r.dlq_offset > at);
          if (left.length < rows.length && refusal === null) this.counts.lostAnswers++;
          rows = left;
          unsure = null;
          if (rows.length === 0) return last;
        }
        if (refusal !== null) return this.#isolate(partition, rows, refusal, signal);
        await this.#lease.hold(signal);
        if (signal.aborted) return null;
        const leaseLeft = this.#lease.until - performance.now();
        const deadline = Math.min(this.#opts.requestTimeoutMs, leaseLeft);
        if (deadline <= 0) continue;
        // One day for the whole insert: one daily partition, one part, stored whole or not at all.
        const at = dateTimeText(Date.now() / 1000);
        for (const r of rows) r.stored_at = at;
        const queryId = `cdr-dlq-fill:${this.#opts.instance}:${partition}:${++this.#seq}`;
        unsure = queryId; // from here on a failure may have stored the rows
        this.counts.inserts++;
        await this.#store.insert(rows, queryId, deadline);
        this.counts.stored += rows.length;
        for (const r of rows) if (r.unreadable) this.counts.unreadable++;
        return last;
      } catch (e) {
        this.counts.failedInserts++;
        const refused = classifyInsertError(e, "DLQ table insert");
        if (!inPlace && unsure !== null && (refused.kind === "data" || refused.kind === "shape")) {
          // The same rows again can never succeed: once the insert is surely ended, and what it
          // stored read back (none, as a rule), the rest are isolated.
          refusal = refused.message;
          continue;
        }
        log.warn("DLQ table: an insert failed; tried again (the filler never dead-letters)", {
          partition,
          rows: rows.length,
          retry_in_ms: delay,
          err: e as Error,
        });
        await abortableSleep(delay, signal);
        delay = Math.min(RETRY_MAX_MS, delay * 2);
      }
    }
  }

  /**
   * Rows the server refused for their values (or their size together): stored in halves, in offset
   * order, down to the row refused alone, which is stored as a row that says so in its place. In
   * order, so no row past a refused one is stored before it: the table's position is its highest
   * offset, and a kill in between would skip the refused one for good.
   */
  async #isolate(partition: number, rows: DlqRow[], refusal: string, signal: AbortSignal): Promise<number | null> {
    if (rows.length === 1) {
      const row = rows[0]!;
      const said = REFUSED_LINE.take({ partition, offset: row.dlq_offset, refusal });
      if (said) log.warn("DLQ table: the server refused a row alone; a row that says so is stored in its place", said);
      const last = await this.#storeRows(partition, [refusedRow(row, refusal)], signal, true);
      if (last !== null) this.counts.refused++;
      return last;
    }
    const mid = rows.length >> 1;
    if ((await this.#storeRows(partition, rows.slice(0, mid), signal)) === null) return null;
    return this.#storeRows(partition, rows.slice(mid), signal);
  }

  /** Advisory: how far the filler got, for lag; a failed commit is said and left to the next. */
  #commit(partition: number, offset: number): void {
    if ((this.#committed.get(partition) ?? -1) >= offset) return;
    this.#committed.set(partition, offset);
    const sent = this.#consumer.commit([{ topic: this.#opts.topic, partition, offset: BigInt(offset) }]);
    this.#lastCommit = sent.catch((e) => {
      this.#committed.delete(partition);
      log.warn("DLQ table: a commit of the filler's position failed; the next one carries it", { err: e as Error });
    });
  }

  #backpressure(): void {
    const over = this.#buffered > this.#opts.maxBufferedBytes;
    const under = this.#buffered <= this.#opts.maxBufferedBytes / 2;
    // Asked every pass of the loop, idle ones too: the partitions are listed only for a change.
    const owned = () => [...this.#next.keys()].map((partition) => ({ topic: this.#opts.topic, partition }));
    if (over && !this.#paused) {
      this.#paused = true;
      this.#consumer.pause(owned());
    } else if (under && this.#paused) {
      this.#paused = false;
      this.#consumer.resume(owned());
    }
  }

  /** Gives the revoked partitions up once no insert of theirs runs: their rows are the next owner's. */
  async #revoke(revoked: readonly TopicPartition[]): Promise<void> {
    const ps = new Set(revoked.map((t) => t.partition));
    if (this.#insert && ps.has(this.#insert.partition)) {
      this.#insert.abort.abort();
      const done = this.#insert.done;
      let ended = false;
      void done.then(() => (ended = true));
      // Polled meanwhile, so the group keeps the member; what arrives is dropped with the partitions.
      while (!ended) {
        for (const m of this.#consumer.poll(512, true)) this.#take(m);
        await this.#consumer.waitForMessages(IDLE_WAIT_MS);
      }
    }
    for (const p of ps) {
      const b = this.#buffers.get(p);
      if (b) this.#buffered -= b.bytes;
      this.#buffers.delete(p);
      this.#next.delete(p);
      this.#caughtUp.delete(p);
      this.#reading.delete(p);
      this.#committed.delete(p);
    }
    this.#consumer.completeRevoke();
  }

  /**
   * On stop: consumption paused, every row read is stored, within `drainTimeoutMs`. Past it the
   * filler ends with rows unstored: the table's position is where the next run takes them up. Polled
   * meanwhile: the lease's proofs come with the polls.
   */
  async #drain(): Promise<void> {
    this.#consumer.pause([...this.#next.keys()].map((partition) => ({ topic: this.#opts.topic, partition })));
    const deadline = performance.now() + this.#opts.drainTimeoutMs;
    for (;;) {
      for (const m of this.#consumer.poll(512)) this.#take(m);
      if (this.#fatal) return;
      if (!this.#insert && [...this.#buffers.values()].every((b) => b.rows.length === 0)) break;
      if (performance.now() > deadline) {
        this.#insert?.abort.abort();
        log.warn("DLQ table: stopped with rows not stored; the next run reads them from the table's position", {
          ...this.counts,
        });
        return;
      }
      this.#flushDue(true);
      await this.#consumer.waitForMessages(IDLE_WAIT_MS);
    }
    log.info("DLQ table: stopped with every row read stored", { ...this.counts });
  }

  #progress(): void {
    if (performance.now() - this.#lastProgress < PROGRESS_EVERY_MS) return;
    this.#lastProgress = performance.now();
    log.info("DLQ table: progress", { ...this.counts, next: Object.fromEntries(this.#next) });
  }

  /** `fn` until it resolves (null once `signal` aborts), waiting longer after each failure. */
  async #retrying<T>(what: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T | null> {
    let delay = RETRY_FIRST_MS;
    for (;;) {
      if (signal?.aborted || this.#stopRequested) return null;
      try {
        return await fn();
      } catch (e) {
        if (e instanceof TopicMismatchError) throw e;
        log.warn(`DLQ table: ${what} failed; tried again`, { retry_in_ms: delay, err: e as Error });
        await abortableSleep(delay, signal);
        delay = Math.min(RETRY_MAX_MS, delay * 2);
      }
    }
  }
}

function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const timer = new Promise<void>((resolve) => (t = setTimeout(resolve, ms)));
  return Promise.race([p.then(() => {}, () => {}), timer]).finally(() => clearTimeout(t));
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });
}
