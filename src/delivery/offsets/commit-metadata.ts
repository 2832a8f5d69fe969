/**
 * What each commit tells a partition's next owner, in the metadata string Kafka keeps with the
 * committed offset: when the first record at or past that offset was consumed (`since`, ms). No
 * record at or past the offset can have reached ClickHouse or the DLQ before then, so the next
 * owner's replay check (replay-check.ts) looks no further back, and a table or DLQ holding rows
 * of an older incarnation of the topic (same partition, same offsets) is never mistaken for them.
 *
 * `txn: 1` marks a commit made in a Kafka transaction together with the DLQ envelopes it passes
 * (transactional-commits.ts), by an owner whose envelopes all lie below its commits: no envelope
 * past it is visible to a read_committed reader, and the next owner's check reads no DLQ. It is a
 * field of version 1, not a version of its own, so that a release that knows no transactions still
 * reads such a commit, as it always did (with its DLQ read): a downgrade stays exact.
 */
const VERSION = 1;

export interface CommitMetadata {
  since: number;
  /** Made in a transaction with the DLQ envelopes below it: none is visible past the commit. */
  transactional: boolean;
}

export function commitMetadata(since: number, transactional = false): string {
  return JSON.stringify({ cdr_worker: VERSION, since: Math.floor(since), ...(transactional ? { txn: 1 } : {}) });
}

/** The worker's metadata, or null for a commit that carries none or another writer's. */
export function readCommitMetadata(text: string | undefined): CommitMetadata | null {
  if (!text) return null;
  try {
    const m = JSON.parse(text) as { cdr_worker?: unknown; since?: unknown; txn?: unknown };
    return m.cdr_worker === VERSION && typeof m.since === "number" && Number.isFinite(m.since)
      ? { since: m.since, transactional: m.txn === 1 }
      : null;
  } catch {
    return null;
  }
}
