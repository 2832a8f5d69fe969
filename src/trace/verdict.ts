/**
 * Where is record X? The verdict `cdr-worker trace` gives from what it found, pure: the table test
 * in test/trace/verdict.test.ts covers each rule. A record is accounted for when it is stored or
 * dead-lettered; otherwise its offset against the partition's positions says why it is neither:
 * not yet written, not yet consumed (at or past the group's commit), gone (below the log start:
 * deleted by the broker before it was stored), not a record (a transaction marker or an aborted
 * record, which a read_committed reader never sees), or missing (committed, readable, and found
 * nowhere: a loss, which `audit` confirms).
 */

export interface StoredRow {
  partition: number;
  offset: number;
  cdr_id: string;
  ingested_at: string;
}

export interface DeadLetteredRow {
  dlq_partition: number;
  dlq_offset: number;
  failure_reason: string;
  failed_field: string | null;
  failed_at: string;
  source_partition: number;
  source_offset: number;
}

/** One partition's positions: its log start and end, and the group's committed offset (-1: none). */
export interface Positions {
  partition: number;
  low: number;
  high: number;
  committed: number;
}

export type Verdict =
  | "stored"
  | "dead_lettered"
  | "stored_and_dead_lettered"
  | "not_yet_written"
  | "not_yet_consumed"
  | "gone"
  | "not_a_record"
  | "missing"
  | "found_nowhere";

/** What trace found of a record at a partition and offset. */
export interface OffsetFacts {
  offset: number;
  positions: Positions;
  stored: readonly StoredRow[];
  deadLettered: readonly DeadLetteredRow[];
  /** Whether a read_committed reader finds a record at the offset (null: not read, outside the log). */
  readable: boolean | null;
  /** Whether the DLQ topic was read past the DLQ table's reach (dlq-tail.ts). */
  fromDlqTopic?: boolean;
}

/** The verdict for a partition and offset, and a line that says it to an operator. */
export function offsetVerdict(f: OffsetFacts): { verdict: Verdict; says: string } {
  const { offset, positions: p } = f;
  const at = `offset ${offset} of partition ${p.partition}`;
  const found = foundVerdict(f.stored, f.deadLettered, at);
  if (found && f.fromDlqTopic)
    return { verdict: found.verdict, says: `${found.says} (in the DLQ topic; the DLQ table does not hold it yet)` };
  if (found) return found;
  if (offset >= p.high) return { verdict: "not_yet_written", says: `${at} is past the partition's end (${p.high})` };
  // Below the log start nothing can consume it any more, whatever the group committed.
  if (offset < p.low)
    return {
      verdict: "gone",
      says: `${at} is gone: the broker deleted it (log start ${p.low}) and it was never stored`,
    };
  if (p.committed < 0 || offset >= p.committed) {
    const from = Math.max(p.committed, p.low);
    const says = `${at} is not yet consumed: ${p.high - from} records wait from ${from}`;
    return { verdict: "not_yet_consumed", says };
  }
  if (f.readable === false)
    return { verdict: "not_a_record", says: `${at} is a transaction marker or an aborted record: nothing to store` };
  const where = f.fromDlqTopic ? " (the DLQ topic read too, past the DLQ table's reach)" : "";
  const says = `${at} was committed (${p.committed}) yet is neither stored nor dead-lettered${where}`;
  return { verdict: "missing", says };
}

/** The verdict for a raw_id, which names no offset: stored, dead-lettered, or found nowhere. */
export function rawIdVerdict(
  rawId: string,
  stored: readonly StoredRow[],
  deadLettered: readonly DeadLetteredRow[],
  positions: readonly Positions[],
): { verdict: Verdict; says: string } {
  const found = foundVerdict(stored, deadLettered, `raw_id ${JSON.stringify(rawId)}`);
  if (found) return found;
  const waiting = positions.reduce((n, p) => n + Math.max(0, p.high - Math.max(p.committed, p.low)), 0);
  return {
    verdict: "found_nowhere",
    says:
      `raw_id ${JSON.stringify(rawId)} is neither stored nor in the DLQ table: not yet consumed ` +
      `(${waiting} records wait), not yet written, or gone before it was stored`,
  };
}

function foundVerdict(
  stored: readonly StoredRow[],
  dead: readonly DeadLetteredRow[],
  what: string,
): { verdict: Verdict; says: string } | null {
  const s = stored[0];
  const d = dead[0];
  if (s && d)
    return {
      verdict: "stored_and_dead_lettered",
      says:
        `${what} is stored (at ${s.ingested_at}) and dead-lettered ` +
        `(DLQ offset ${d.dlq_offset}, ${d.failure_reason})`,
    };
  if (s) return { verdict: "stored", says: `${what} is stored: cdr_id ${s.cdr_id}, at ${s.ingested_at}` };
  if (d)
    return {
      verdict: "dead_lettered",
      says:
        `${what} is dead-lettered: DLQ partition ${d.dlq_partition} offset ${d.dlq_offset}, ${d.failure_reason}` +
        `${d.failed_field ? ` (${d.failed_field})` : ""}, at ${d.failed_at}`,
    };
  return null;
}
