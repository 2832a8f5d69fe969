/**
 * Exactly-once across crashes and rebalances, with nothing beside Kafka and ClickHouse: before a
 * new owner reads a partition, it learns which records past the committed offset its last owner
 * already delivered, so that it skips them instead of storing or dead-lettering them again.
 *
 * Every commit carries the consumption time of the first record not yet durable
 * (commit-metadata.ts). From the committed offset C and that time T the check reads
 *   - ClickHouse: the rows of that partition with kafka_offset ≥ C ingested since T, after the
 *     inserts still running on the server (an owner killed mid-insert) have ended;
 *   - the DLQ: the envelopes produced since T whose source is that partition at ≥ C, unless the
 *     commit was made in a transaction with the envelopes it passes (exactly-once's commits,
 *     transactional-commits.ts): then none past C is visible to the check's read_committed reader.
 * A partition whose commit carries no metadata (its first owner, one of a release without it, or a
 * group whose offsets an operator deleted) gets a commit with metadata at its current position
 * first: from then on every owner leaves what the next one needs, before it delivers anything. Where
 * the offsets table holds a row of such a partition at or past that position (the group's offsets
 * were deleted, or the group renamed, after records were stored), every record below the partition's
 * end is looked up in the table before it is sent (`unsureBelow`): the table has no time to bound
 * the read by, so a row counts only where its record matches (Replays.unsure), never by offset alone.
 *
 * The answer is a set of facts ("offset o was delivered"), so skipping it is never wrong; what it
 * cannot see is an insert that a worker cut off from Kafka, but not from ClickHouse, makes after
 * the check (docs/internals.md "Exactly-once").
 */
import { CdrWorkerError, KafkaError } from "../../errors.ts";
import { log } from "../../log.ts";
import type { TopicPartition } from "../../kafka/partition-list.ts";
import { commitMetadata, readCommitMetadata } from "./commit-metadata.ts";
import type { DeadLettered, DeliveredOffsets, Owned } from "../../ownership/delivered.ts";

export type { DeadLettered, DeliveredOffsets, Owned };

/** What the check found of one partition: the offsets delivered past the commit, and the commit's time. */
export interface Delivered {
  offsets: Set<number>;
  /** The `since` the check read from (the commit's metadata, or the time of the commit it made). */
  since: number;
  /** The committed offset the check read, or the one it committed; absent where none was found. */
  committed?: number;
  /**
   * Offsets known only from a proven envelope: the record read there is skipped only if its payload
   * has this SHA-256 (another record at that offset is not the one the envelope stands for).
   */
  digests?: Map<number, string>;
  /**
   * The partition's end (high watermark) when the check began: the last owner can have stored only
   * records below it, and those the offsets table does not show are looked up again, in the table
   * itself, before they are sent (Replays.unsure). Absent where the last owner left no such trace.
   */
  unsureBelow?: number;
  /** The commit read was transactional (commit-metadata.ts): the DLQ was not read. */
  transactional?: boolean;
}

export interface ReplayCheckDeps {
  topic: string;
  /** The group's committed offsets with their metadata; asked without blocking the event loop. */
  committed(partitions: readonly TopicPartition[]): Promise<TopicPartition[]>;
  commit(offsets: readonly TopicPartition[]): Promise<unknown>;
  /** Each partition's first offset, for partitions nothing was ever committed for. */
  lowWatermarks(partitions: readonly number[]): Promise<Map<number, number>>;
  /** Each partition's end: no record at or past it existed when the check began. */
  highWatermarks(partitions: readonly number[]): Promise<Map<number, number>>;
  /** Resolves once the inserts running on the server when it was called have ended. */
  insertsEnded(): Promise<void>;
  stored(owned: readonly Owned[]): Promise<DeliveredOffsets>;
  /** The partitions whose stored offsets include one in [from, to) (a point read each); absent: none asked. */
  anyStored?(ranges: ReadonlyArray<{ partition: number; from: number; to: number }>): Promise<Set<number>>;
  deadLettered(owned: readonly Owned[]): Promise<DeadLettered>;
  now?: () => number;
}

/** The offsets past each partition's committed offset that were already delivered (possibly none). */
export async function findDelivered(
  partitions: readonly number[],
  d: ReplayCheckDeps,
): Promise<Map<number, Delivered>> {
  const now = d.now ?? Date.now;
  const checkedAt = now();
  const committed = await d.committed(partitions.map((partition) => ({ topic: d.topic, partition })));
  const owned: Owned[] = [];
  const unmarked: TopicPartition[] = [];
  // A partition whose committed offset could not be read is not "never committed": committing its
  // low watermark would move it back. The check is tried again.
  const failed = committed.find((c) => c.err);
  if (failed) {
    const what = `reading the committed offset of partition ${failed.partition}: librdkafka error ${failed.err}`;
    throw new KafkaError("KAFKA_CLIENT", what, failed.err, undefined, true);
  }
  const offsetOf = (c: TopicPartition) => (c.offset !== undefined && c.offset >= 0n ? Number(c.offset) : null);
  const low = await d.lowWatermarks(committed.filter((c) => offsetOf(c) === null).map((c) => c.partition));
  for (const c of committed) {
    const meta = readCommitMetadata(c.metadata);
    const offset = offsetOf(c);
    if (offset !== null && meta)
      owned.push({
        partition: c.partition,
        from: offset,
        since: meta.since,
        ...(meta.transactional ? { transactional: true } : {}),
      });
    else {
      const position = offset ?? low.get(c.partition);
      if (position === undefined) throw new KafkaError("KAFKA_CLIENT", `no first offset of partition ${c.partition}`);
      unmarked.push({
        topic: d.topic,
        partition: c.partition,
        offset: BigInt(position),
        metadata: commitMetadata(checkedAt),
      });
    }
  }
  if (unmarked.length) await d.commit(unmarked);
  const since = new Map(owned.map((o) => [o.partition, o.since]));
  const transactional = new Set(owned.filter((o) => o.transactional).map((o) => o.partition));
  const at = new Map<number, number>(owned.map((o) => [o.partition, o.from]));
  for (const u of unmarked) at.set(u.partition, Number(u.offset));
  const delivered = new Map<number, Delivered>(
    partitions.map((p) => {
      const committed = at.get(p);
      const d: Delivered = { offsets: new Set<number>(), since: since.get(p) ?? checkedAt };
      if (committed !== undefined) d.committed = committed;
      if (transactional.has(p)) d.transactional = true;
      return [p, d];
    }),
  );
  if (unmarked.length && d.anyStored) await unsureWithoutCommit(unmarked, delivered, d, d.anyStored);
  if (owned.length === 0) return delivered;
  const ends = await d.highWatermarks(owned.map((o) => o.partition));
  for (const o of owned) {
    const end = ends.get(o.partition);
    if (end !== undefined && end > o.from) delivered.get(o.partition)!.unsureBelow = end;
  }
  // One key range per partition, closed at its end: the read's rows are the commit's to the end.
  const bounded = owned.map((o) => {
    const end = ends.get(o.partition);
    return end === undefined ? o : { ...o, to: Math.max(o.from, end) };
  });
  await d.insertsEnded();
  // Below a transactional commit every envelope is passed and past it none is visible: no DLQ read.
  const withEnvelopes = owned.filter((o) => !o.transactional);
  const none: DeadLettered = { offsets: new Map(), digests: new Map() };
  const [stored, dead] = await Promise.all([
    d.stored(bounded),
    withEnvelopes.length > 0 ? d.deadLettered(withEnvelopes) : none,
  ]);
  for (const found of [stored, dead.offsets])
    for (const [p, offsets] of found) {
      const set = delivered.get(p)?.offsets;
      if (set) for (const o of offsets) set.add(o);
    }
  for (const [p, digests] of dead.digests) {
    const f = delivered.get(p);
    if (!f) continue;
    // A row stored there needs no proof of the payload: the table's own provenance stands.
    const storedHere = new Set(stored.get(p) ?? []);
    for (const [o, digest] of digests) if (!storedHere.has(o)) (f.digests ??= new Map()).set(o, digest);
  }
  return delivered;
}

/**
 * Partitions with no commit to read from whose positions the offsets table already holds rows past:
 * every record below the end is looked up before it is sent (the header).
 */
async function unsureWithoutCommit(
  unmarked: readonly TopicPartition[],
  delivered: Map<number, Delivered>,
  d: ReplayCheckDeps,
  anyStored: NonNullable<ReplayCheckDeps["anyStored"]>,
): Promise<void> {
  const ends = await d.highWatermarks(unmarked.map((u) => u.partition));
  const ranges = unmarked
    .map((u) => ({ partition: u.partition, from: Number(u.offset), to: ends.get(u.partition) ?? Number(u.offset) }))
    .filter((r) => r.to > r.from);
  if (ranges.length === 0) return;
  let holding: Set<number>;
  try {
    await d.insertsEnded();
    holding = await anyStored(ranges);
  } catch (e) {
    // ClickHouse not answering (a first start in an outage): the partition goes on as a first
    // owner's does, unchecked, and says so; what no retry helps (a grant missing) stops the worker.
    if (e instanceof CdrWorkerError && !e.retryable) throw e;
    log.warn("replay check: the offsets table could not be read for partitions with no commit; they go on unchecked", {
      partitions: ranges.map((r) => r.partition),
      err: e as Error,
    });
    holding = new Set();
  }
  for (const r of ranges) if (holding.has(r.partition)) delivered.get(r.partition)!.unsureBelow = r.to;
}
