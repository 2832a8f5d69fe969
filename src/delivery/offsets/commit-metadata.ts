/**
 * What each commit tells a partition's next owner, in the metadata string Kafka keeps with the
 * committed offset: when the first record at or past that offset was consumed (`since`, ms). No
 * record at or past the offset can have reached ClickHouse or the DLQ before then, so the next
 * owner's replay check (replay-check.ts) looks no further back, and a table or DLQ holding rows
 * of an older incarnation of the topic (same partition, same offsets) is never mistaken for them.
 */
const VERSION = 1;

export interface CommitMetadata {
  since: number;
}

export function commitMetadata(since: number): string {
  return JSON.stringify({ cdr_worker: VERSION, since: Math.floor(since) });
}

/** The worker's metadata, or null for a commit that carries none or another writer's. */
export function readCommitMetadata(text: string | undefined): CommitMetadata | null {
  if (!text) return null;
  try {
    const m = JSON.parse(text) as { cdr_worker?: unknown; since?: unknown };
    return m.cdr_worker === VERSION && typeof m.since === "number" && Number.isFinite(m.since)
      ? { since: m.since }
      : null;
  } catch {
    return null;
  }
}
