/**
 * Per-partition commit positions: the committed offset is always one past the highest offset
 * below which every record is durable (in ClickHouse, or acknowledged by the DLQ).
 *
 * Records are tracked in consumption (= offset) order as runs ("holds") of consecutive records
 * with the same destination: a ClickHouse batch or one DLQ send. A destination marks its holds
 * done when acknowledged; the position advances over the done holds at the head of the queue.
 * So an invalid record's offset is committable at once when nothing precedes it, and only after
 * the preceding valid rows are flushed otherwise (docs/internals.md "Delivery").
 */

export interface Hold {
  partition: number;
  /** Highest offset in this run (inclusive). */
  last: number;
  done: boolean;
  owner: object;
  /** When its first record was consumed (ms since the epoch). */
  at: number;
  /** Waiting for every earlier hold of its partition to be done or sent alone (`whenReached`). */
  onReached?: () => void;
  /** A record handed over inside a gap (read again): held by the gap's hold, not in the queue. */
  inGap?: true;
}

/** A position to commit, with when the first record not yet durable there was consumed. */
export interface Advanced {
  partition: number;
  offset: number;
  /**
   * Consumption time (ms) of the record at `offset` when it is consumed and not yet durable, else
   * the time of this call: no record at or past `offset` was handed to a destination before it.
   */
  since: number;
}

interface PartitionState {
  holds: Hold[];
  /** Index of the first live hold in `holds` (a head pointer instead of shift()). */
  head: number;
  /** Next offset to commit, or -1 before the first durable record. */
  position: number;
  /** Position last handed out by `advanced()`. */
  reported: number;
  /** Position the group acknowledged (`confirm`), or -1. */
  committed: number;
  /** Highest offset consumed + 1. */
  consumed: number;
  /** First offset ever tracked (the position before anything became durable). */
  first: number;
  /** Index in `holds` of the first hold `whenReached` may not pass yet: a ClickHouse batch's, not done. */
  reach: number;
  /** Gaps not settled whose offsets may still be handed over (read again). */
  open: GapHold[];
  /** [from, to) the worker's own seek back to a gap will hand out again (`rewound`), or null. */
  rewound: [number, number] | null;
}

/** The owner of holds made by trackAlone(): never extended, since track() is never given it. */
const ALONE = Object.freeze({});
/** The owner of offsets librdkafka passed over on purpose and said so (`passed`): done at once. */
const PASSED = Object.freeze({});
/** The owner of a gap's hold (GapHold). */
const GAP = Object.freeze({});

/**
 * Offsets never handed over, held in the queue where they fell: the position stops at `from` until
 * the gap is settled (gaps.ts: expired, passed over, or read again) and every record handed over
 * inside it since is durable too.
 */
export interface GapHold extends Hold {
  /** First offset not handed over; `last` is the gap's last. */
  from: number;
  /** Offsets of the gap neither handed over nor passed over since, as [from, to) ranges. */
  missing: Array<[number, number]>;
  /** Holds of the records handed over inside the gap after it was found (read again). */
  children: Hold[];
  /** Nothing more is awaited for it: it is done once its children are. */
  settled: boolean;
  /** Set while the gap is read again (gaps.ts): called once an offset past it is handed out. */
  onPassed?: () => void;
}

/**
 * Offsets `from` (inclusive) to `to` (exclusive) of a partition were never handed over (gaps.ts).
 * `hold` stands in the commit's way until settled; none where the commit has passed the gap already
 * (a start learned after the first records were tracked).
 */
export type OnGap = (partition: number, from: number, to: number, hold?: GapHold) => void;

export class OffsetTracker {
  readonly #parts = new Map<number, PartitionState>();
  /** Per partition not yet tracked, the offset its first record should have: the committed one. */
  readonly #starts = new Map<number, number>();
  /** Wall-clock milliseconds: when holds start and what `since` a position without one carries. */
  readonly #now: () => number;
  readonly #onGap: OnGap;

  /** `onGap`: where gaps are told apart; without one a gap is settled as it is found (not accounted). */
  constructor(now: () => number = Date.now, onGap?: OnGap) {
    this.#now = now;
    this.#onGap = onGap ?? ((_p, _f, _t, hold) => hold && this.settle(hold));
  }

  /**
   * The offset a partition's records start from under this assignment (its committed offset): a
   * first record past it is a gap. Where records were tracked already, their first one is compared.
   */
  startAt(partition: number, offset: number): void {
    const p = this.#parts.get(partition);
    if (!p) this.#starts.set(partition, offset);
    else if (p.first > offset) this.#onGap(partition, offset, p.first);
  }

  /**
   * Registers the next consumed record of a partition. Returns a new hold for the owner to mark
   * when durable, or null when the record extended the owner's current run on that partition.
   */
  track(partition: number, offset: number, owner: object): Hold | null {
    const p = this.#consume(partition, offset);
    if (p === null) return this.#child(partition, offset, owner);
    const tail = p.holds.length > p.head ? p.holds[p.holds.length - 1]! : undefined;
    if (tail && tail.owner === owner && !tail.done) {
      tail.last = offset;
      return null;
    }
    return this.#push(p, partition, offset, owner);
  }

  /**
   * Whether a record at `offset` was handed over already under this assignment (the partition
   * tracked): below the highest offset consumed, and not an offset of a gap still missing. An
   * offset past a gap being read again says the read has passed it (GapHold.onPassed).
   */
  consumedAlready(partition: number, offset: number): boolean {
    const p = this.#parts.get(partition);
    if (p === undefined || offset >= p.consumed) return false;
    if (p.open.length === 0) return true;
    this.#passing(p, offset);
    return !p.open.some((g) => missingAt(g, offset) >= 0);
  }

  /**
   * The worker seeks back to `from` to read a gap again: what it consumed from there on comes out a
   * second time by its own doing, not librdkafka's (`byOwnSeek`).
   */
  rewound(partition: number, from: number): void {
    const p = this.#parts.get(partition);
    if (p !== undefined && from < p.consumed) p.rewound = [from, p.consumed];
  }

  /** Whether a record consumed already comes again because of the worker's own seek back (`rewound`). */
  byOwnSeek(partition: number, offset: number): boolean {
    const r = this.#parts.get(partition)?.rewound;
    return r != null && offset >= r[0] && offset < r[1];
  }

  /** Registers one record that is durable on its own (a DLQ send): always a hold of its own. */
  trackAlone(partition: number, offset: number): Hold {
    const p = this.#consume(partition, offset);
    return p === null ? this.#child(partition, offset, ALONE) : this.#push(p, partition, offset, ALONE);
  }

  /**
   * An offset librdkafka passed over on purpose and said so (a control record, an aborted record:
   * Message.passedOver): no record stands for it, and the position moves past it with the rest.
   */
  passed(partition: number, offset: number): void {
    if (this.consumedAlready(partition, offset)) return;
    const p = this.#consume(partition, offset);
    if (p === null) return;
    const tail = p.holds.length > p.head ? p.holds[p.holds.length - 1]! : undefined;
    if (tail && tail.owner === PASSED) tail.last = offset;
    else this.#push(p, partition, offset, PASSED).done = true;
  }

  /**
   * The partition's state for a record at `offset`, with any gap before it held; null for an offset
   * inside a gap still missing (read again): taken out of the gap, the caller holds it there.
   */
  #consume(partition: number, offset: number): PartitionState | null {
    let p = this.#parts.get(partition);
    if (!p) {
      p = {
        holds: [], head: 0, position: -1, reported: -1, committed: -1, consumed: -1, first: offset, reach: 0, open: [],
        rewound: null,
      };
      this.#parts.set(partition, p);
      const start = this.#starts.get(partition);
      if (start !== undefined) {
        this.#starts.delete(partition);
        if (offset > start) this.#gap(p, partition, start, offset);
      }
    } else if (offset > p.consumed) this.#gap(p, partition, p.consumed, offset);
    else if (offset < p.consumed) {
      this.#passing(p, offset);
      for (const g of p.open) {
        const i = missingAt(g, offset);
        if (i < 0) continue;
        const [from, to] = g.missing[i]!;
        const left: Array<[number, number]> = [[from, offset], [offset + 1, to]];
        g.missing.splice(i, 1, ...left.filter(([a, b]) => b > a));
        this.#gapHere = g;
        return null;
      }
    }
    if (p.open.length > 0) this.#passing(p, offset);
    // Past what the seek back repeats: a record handed out again from here on is librdkafka's doing.
    if (p.rewound && offset >= p.rewound[1]) p.rewound = null;
    p.consumed = Math.max(p.consumed, offset + 1);
    return p;
  }

  /** The gap #consume last took an offset out of. */
  #gapHere: GapHold | null = null;

  /** A hold inside the gap #consume found the offset in: never extended, done as its owner says. */
  #child(partition: number, offset: number, owner: object): Hold {
    const hold: Hold = { partition, last: offset, done: false, owner, at: this.#now(), inGap: true };
    this.#gapHere!.children.push(hold);
    return hold;
  }

  /** Offsets `from` to `to` never handed over: held in the queue, and reported. */
  #gap(p: PartitionState, partition: number, from: number, to: number): void {
    const hold: GapHold = {
      partition, last: to - 1, done: false, owner: GAP, at: this.#now(), from, missing: [[from, to]], children: [],
      settled: false,
    };
    p.holds.push(hold);
    p.open.push(hold);
    this.#onGap(partition, from, to, hold);
  }

  /** An offset handed out at or past a gap being read again: that read has passed it. */
  #passing(p: PartitionState, offset: number): void {
    for (const g of p.open)
      if (g.onPassed && offset > g.last) {
        const passed = g.onPassed;
        g.onPassed = undefined;
        passed();
      }
  }

  /**
   * Nothing more is awaited for a gap (gaps.ts): what is still missing of it is gone, or stands
   * dead-lettered; it is done once the records handed over inside it are durable.
   */
  settle(gap: GapHold): void {
    gap.settled = true;
    gap.onPassed = undefined;
    const p = this.#parts.get(gap.partition);
    if (p) p.open = p.open.filter((g) => g !== gap);
  }

  #push(p: PartitionState, partition: number, offset: number, owner: object): Hold {
    const hold: Hold = { partition, last: offset, done: false, owner, at: this.#now() };
    p.holds.push(hold);
    return hold;
  }

  /**
   * Calls `fn` once every hold before `hold` in its partition is done, or is a record sent alone (a DLQ
   * send, durable before the next transaction's commit: transactional-commits.ts): at once when
   * that is so already. Exactly-once produces an envelope only then, so the commit that comes with
   * its transaction passes it however long an earlier batch's inserts take.
   */
  whenReached(hold: Hold, fn: () => void): void {
    // A record read again inside a gap: no commit passes the gap before it is done, whatever
    // stands before it, so nothing holds its envelope.
    if (hold.inGap) return fn();
    hold.onReached = fn;
    this.reach(hold.partition);
  }

  /** Runs the waits `whenReached` registered that are now reached; call when a hold of `partition` is done. */
  reach(partition: number): void {
    const p = this.#parts.get(partition);
    if (!p) return;
    const holds = p.holds;
    let i = Math.max(p.reach, p.head);
    for (; i < holds.length; i++) {
      const h = holds[i]!;
      const fn = h.onReached;
      if (fn) {
        h.onReached = undefined;
        fn();
      }
      if (!isDone(h) && h.owner !== ALONE) break;
    }
    p.reach = i;
  }

  /** Positions that moved since the last call: what to commit now. */
  advanced(now = this.#now()): Advanced[] {
    const out: Advanced[] = [];
    for (const [partition, p] of this.#parts) {
      while (p.head < p.holds.length && isDone(p.holds[p.head]!)) p.position = p.holds[p.head++]!.last + 1;
      if (p.head > 1024 && p.head * 2 > p.holds.length) {
        p.holds = p.holds.slice(p.head);
        // A walk never starts before the head: a mark behind it means the head.
        p.reach = Math.max(0, p.reach - p.head);
        p.head = 0;
      }
      if (p.position > p.reported) {
        p.reported = p.position;
        out.push({ partition, offset: p.position, since: p.head < p.holds.length ? p.holds[p.head]!.at : now });
      }
    }
    return out;
  }

  /**
   * Every partition's position as it stands, moved or not, for partitions with one: a transaction
   * commits them all (delivery.ts). An unchanged position is accepted like any other commit, and
   * its `since` is worked out as `advanced()` does.
   */
  standing(now = this.#now()): Advanced[] {
    const out: Advanced[] = [];
    for (const [partition, p] of this.#parts)
      if (p.position >= 0)
        out.push({ partition, offset: p.position, since: p.head < p.holds.length ? p.holds[p.head]!.at : now });
    return out;
  }

  /**
   * librdkafka's position in a partition (`next`): every offset below it was handed over or passed
   * over, a transaction's control record or an aborted transaction's records, which no hold stands
   * for. Once every record handed over is durable, the position moves there: a transactional
   * producer's last commit marker is committed past, and counts as no lag. True when it moved.
   */
  passOver(partition: number, next: number): boolean {
    const p = this.#parts.get(partition);
    if (!p || next <= p.consumed) return false;
    if (p.open.length > 0) this.#passing(p, next - 1);
    while (p.head < p.holds.length && isDone(p.holds[p.head]!)) p.position = p.holds[p.head++]!.last + 1;
    if (p.head < p.holds.length || p.position !== p.consumed) return false;
    this.#gap(p, partition, p.consumed, next);
    p.consumed = next;
    return true;
  }

  /** The group acknowledged these positions. */
  confirm(positions: ReadonlyArray<{ partition: number; offset: number }>): void {
    for (const { partition, offset } of positions) {
      const p = this.#parts.get(partition);
      if (p && offset > p.committed) p.committed = offset;
    }
  }

  /**
   * The group refused to commit these positions (it was rebalancing): hand them out again with
   * the next `advanced()`, for the partitions still tracked; a revoked partition was reset and
   * its position is never handed out again.
   */
  refused(positions: ReadonlyArray<{ partition: number }>): void {
    for (const { partition } of positions) {
      const p = this.#parts.get(partition);
      if (p) p.reported = p.committed;
    }
  }

  positions(): Map<number, { committed: number; consumed: number }> {
    const m = new Map<number, { committed: number; consumed: number }>();
    for (const [partition, p] of this.#parts) m.set(partition, { committed: p.committed, consumed: p.consumed });
    return m;
  }

  /** Forgets partitions (after a revocation, or all when none given). */
  reset(partitions?: readonly number[]): void {
    if (!partitions) {
      this.#parts.clear();
      this.#starts.clear();
    } else
      for (const p of partitions) {
        this.#parts.delete(p);
        this.#starts.delete(p);
      }
  }
}

/** The index in `gap.missing` of the range holding `offset`, or -1. */
function missingAt(gap: GapHold, offset: number): number {
  if (offset < gap.from || offset > gap.last) return -1;
  return gap.missing.findIndex(([from, to]) => offset >= from && offset < to);
}

/** Done: marked so, or a gap settled whose records handed over inside it are all done. */
function isDone(h: Hold): boolean {
  if (h.done) return true;
  if (h.owner !== GAP) return false;
  const g = h as GapHold;
  if (g.settled && g.children.every((c) => c.done)) g.done = true;
  return g.done;
}
