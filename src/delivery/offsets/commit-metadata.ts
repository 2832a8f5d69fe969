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

/**
 * The offsets with a transaction's nonce in their metadata: a commit whose answer was lost is
 * recognized by it in the group's offsets (transactional-commits.ts). Readers ignore the field.
 */
export function withNonce<T extends { metadata?: string }>(offsets: readonly T[], nonce: string): T[] {
  return offsets.map((o) => {
    if (!o.metadata) return { ...o, metadata: JSON.stringify({ nonce }) };
    try {
      return { ...o, metadata: JSON.stringify({ ...(JSON.parse(o.metadata) as object), nonce }) };
    } catch {
      return o; // another writer's text: left as it is
    }
  });
}

/** The nonce a commit's metadata carries, if any. */
export function readCommitNonce(text: string | undefined): string | null {
  if (!text) return null;
  try {
    const nonce = (JSON.parse(text) as { nonce?: unknown }).nonce;
    return typeof nonce === "string" ? nonce : null;
  } catch {
    return null;
  }
}
