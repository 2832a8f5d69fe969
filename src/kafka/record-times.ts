/**
 * When the records at given offsets were written: the timestamps of the first record at or after
 * each offset, read with a consumer of its own that joins no group. What lag in time is measured
 * from (stats/lag-time.ts): a partition the worker has paused fetches nothing, so its own consumer
 * cannot tell how old its oldest waiting record is.
 */
import type { RangeReader } from "./consumer.ts";

/** How long one read waits for a record before it gives up on the partitions still unanswered. */
const READ_TIMEOUT_MS = 5000;

export class RecordTimes {
  constructor(
    private readonly reader: Pick<RangeReader, "assign" | "poll" | "endReached">,
    private readonly timeoutMs = READ_TIMEOUT_MS,
  ) {}

  /**
   * Each partition's record timestamp (ms) at or after its offset, or null where the fetcher reports
   * the partition's end at or before the offset (no such record: nothing waits). A partition that did
   * not answer in time, or whose record carries no timestamp, is left out.
   */
  async at(topic: string, offsets: ReadonlyMap<number, number>): Promise<Map<number, number | null>> {
    const found = new Map<number, number | null>();
    if (offsets.size === 0) return found;
    const open = new Set(offsets.keys());
    this.reader.assign([...offsets].map(([partition, offset]) => ({ topic, partition, offset: BigInt(offset) })));
    try {
      const deadline = Date.now() + this.timeoutMs;
      while (open.size > 0 && Date.now() < deadline) {
        const batch = this.reader.poll();
        for (const m of batch) {
          if (!open.has(m.partition) || m.offset < offsets.get(m.partition)!) continue;
          if (m.timestamp >= 0) found.set(m.partition, m.timestamp);
          open.delete(m.partition);
        }
        for (const p of open)
          if ((this.reader.endReached(p) ?? -1) >= offsets.get(p)! && !found.has(p)) {
            found.set(p, null);
            open.delete(p);
          }
        if (batch.length === 0 && open.size > 0) await Bun.sleep(5);
      }
    } finally {
      // Fetch nothing between reads.
      this.reader.assign([]);
    }
    return found;
  }
}
