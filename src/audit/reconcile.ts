/**
 * The audit's comparison, for one partition: three ascending streams of offsets merged in step —
 * the records Kafka holds, the rows ClickHouse holds (by kafka_offset), the envelopes the DLQ
 * holds (by their source offset) — into counts and the first offsets of each finding. Pure: the
 * streams are async iterables, so tests feed arrays and `cdr-worker audit` feeds the real readers.
 *
 * Findings, per offset o in the range:
 *   missing                   o holds a record, and neither a row nor an envelope stands for it
 *   stored_twice              o was stored more than once (the offsets table: merges never hide it)
 *   dead_lettered_twice       more than one envelope has o as its source
 *   stored_and_dead_lettered  o has a row and an envelope
 *   not_a_record              a row or an envelope has o, and o holds no record (read_committed)
 * Offsets that hold no record (transaction markers, aborted records) are not gaps. A record whose
 * row a producer's replay of it replaced (same cdr_id at a later offset: ReplacingMergeTree keeps
 * one row, at insert on current releases and at merges on all) is told apart by the caller:
 * `onMissing` hears each missing offset while its record is the one just read (cli/audit.ts).
 */

export interface PartitionFindings {
  partition: number;
  from: number;
  to: number;
  records: number;
  stored: number;
  dead_lettered: number;
  missing: number;
  stored_twice: number;
  dead_lettered_twice: number;
  stored_and_dead_lettered: number;
  not_a_record: number;
  /** Missing offsets whose record's cdr_id is stored at another offset: a producer's replay, collapsed. */
  replays_collapsed: number;
  /** The first offsets of each finding (at most SAMPLES each). */
  samples: Record<Finding, number[]>;
}

export type Finding = "missing" | "stored_twice" | "dead_lettered_twice" | "stored_and_dead_lettered" | "not_a_record";
export const FINDINGS: readonly Finding[] = [
  "missing",
  "stored_twice",
  "dead_lettered_twice",
  "stored_and_dead_lettered",
  "not_a_record",
];
const SAMPLES = 10;

/** Sum of the findings that make an audit fail. */
export function failures(f: Pick<PartitionFindings, Finding>): number {
  return FINDINGS.reduce((n, k) => n + f[k], 0);
}

/** Reads an ascending stream one offset ahead. */
class Cursor {
  readonly #it: AsyncIterator<number>;
  head: number | null = null;
  constructor(source: AsyncIterable<number>) {
    this.#it = source[Symbol.asyncIterator]();
  }
  async next(): Promise<void> {
    const r = await this.#it.next();
    this.head = r.done ? null : r.value;
  }
  /** How many entries equal `o`, consumed; entries below it are handed to `below` first. */
  async take(o: number, below: (x: number) => void): Promise<number> {
    while (this.head !== null && this.head < o) {
      below(this.head);
      await this.next();
    }
    let n = 0;
    while (this.head === o) {
      n++;
      await this.next();
    }
    return n;
  }
}

export async function reconcile(
  partition: number,
  range: { from: number; to: number },
  records: AsyncIterable<number>,
  rows: AsyncIterable<number>,
  envelopes: AsyncIterable<number>,
  onMissing: (offset: number) => void = () => {},
  /** Envelopes at this offset not to count: proven for another payload than the record read there. */
  notThisRecord: (offset: number) => number = () => 0,
): Promise<PartitionFindings> {
  const f: PartitionFindings = {
    partition,
    ...range,
    records: 0,
    stored: 0,
    dead_lettered: 0,
    missing: 0,
    stored_twice: 0,
    dead_lettered_twice: 0,
    stored_and_dead_lettered: 0,
    not_a_record: 0,
    replays_collapsed: 0,
    samples: { missing: [], stored_twice: [], dead_lettered_twice: [], stored_and_dead_lettered: [], not_a_record: [] },
  };
  const note = (k: Finding, o: number) => {
    f[k]++;
    if (f.samples[k].length < SAMPLES) f.samples[k].push(o);
  };
  // Several rows or envelopes at one offset that holds no record count once, as one finding.
  let lastStray = -1;
  const stray = (o: number) => {
    if (o !== lastStray) note("not_a_record", o);
    lastStray = o;
  };
  const ch = new Cursor(rows);
  const dlq = new Cursor(envelopes);
  await ch.next();
  await dlq.next();
  for await (const o of records) {
    f.records++;
    const stored = await ch.take(o, stray);
    const deadLettered = Math.max(0, (await dlq.take(o, stray)) - notThisRecord(o));
    if (stored > 0) f.stored++;
    if (deadLettered > 0) f.dead_lettered++;
    if (stored === 0 && deadLettered === 0) {
      note("missing", o);
      onMissing(o);
    }
    if (stored > 1) note("stored_twice", o);
    if (deadLettered > 1) note("dead_lettered_twice", o);
    if (stored > 0 && deadLettered > 0) note("stored_and_dead_lettered", o);
  }
  await ch.take(Number.POSITIVE_INFINITY, stray);
  await dlq.take(Number.POSITIVE_INFINITY, stray);
  return f;
}

/** Takes offsets that turned out to be collapsed replays out of `missing` (and its samples). */
export function collapsedReplays(f: PartitionFindings, offsets: ReadonlySet<number>): void {
  f.missing -= offsets.size;
  f.replays_collapsed += offsets.size;
  f.samples.missing = f.samples.missing.filter((o) => !offsets.has(o));
}
