/**
 * What a partition's last owner delivered past its commit, as the next owner's replay check asks it
 * (delivery/offsets/replay-check.ts) of the table (clickhouse/writer.ts) and of the DLQ
 * (dlq/delivered.ts): the partitions asked, and the offsets each answers with. Types only, on the
 * floor all three stand on.
 */

/** A partition to check: its committed offset and when the first record at or past it was consumed. */
export interface Owned {
  partition: number;
  from: number;
  since: number;
  /**
   * The partition's end when the check began (its high watermark), exclusive: the last owner can
   * have stored no record at or past it, so the read of what it stored stops there.
   */
  to?: number;
  /** The commit was made in a transaction with every envelope below it: the DLQ holds none past it. */
  transactional?: boolean;
}

/** Offsets delivered, by partition. */
export type DeliveredOffsets = Map<number, number[]>;

/**
 * Offsets the DLQ holds an envelope for, and with DLQ_PROVENANCE_KEY the payload SHA-256 each one's
 * MAC proved, by partition and offset (dlq/provenance-mac.ts); without a key `digests` is empty.
 */
export interface DeadLettered {
  offsets: DeliveredOffsets;
  digests: Map<number, Map<number, string>>;
}
