/**
 * What the audit reads, each as ascending offsets of one partition at a time (reconcile.ts):
 *   - the raw topic's records, read_committed, from a handle assigned one partition at a time;
 *   - ClickHouse's stored offsets (the offsets table, sorted by partition and offset, never
 *     collapsed by merges): one query over every audited partition's key range, streamed, so the
 *     client holds one line at a time;
 *   - the DLQ's envelopes by source offset: the DLQ is keyed by nothing the audit can seek, so it
 *     is read once, whole or from where the last `--resume` run left it (position.ts), and its
 *     source offsets kept, 8 bytes each, for the audited partitions.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { sourceOffsets, type DlqPosition } from "../dlq/delivered.ts";
import type { ProvenanceKey } from "../dlq/provenance-mac.ts";
import type { Consumer } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";

export interface Range {
  partition: number;
  from: number;
  to: number;
}

/** Offsets of the records in [from, to) of one partition, ascending. */
export async function* recordOffsets(
  consumer: Consumer,
  topic: string,
  r: Range,
  onRead: (m: Message) => void = () => {},
): AsyncGenerator<number> {
  if (r.to <= r.from) return;
  consumer.assign([{ topic, partition: r.partition, offset: BigInt(r.from) }]);
  for (;;) {
    const batch = consumer.poll();
    if (batch.length === 0) {
      // Offsets up to `to` that never arrive hold no record (a transaction's marker, an aborted
      // record): the fetcher's end of the partition at or past `to` says so (enable.partition.eof).
      if ((consumer.endReached(r.partition) ?? -1) >= r.to) return;
      await consumer.waitForMessages(100);
      continue;
    }
    for (const m of batch) {
      if (m.partition !== r.partition || m.offset < r.from) continue;
      if (m.offset >= r.to) return;
      onRead(m); // before the yield: the caller may look at its value while it handles the offset
      yield m.offset;
      if (m.offset + 1 >= r.to) return;
    }
  }
}

/** The stored offsets of every range, one query; `of(p)` streams partition p's (ascending p, please). */
export function storedOffsets(ch: ClickHouseClient, offsetsTable: string, ranges: readonly Range[]) {
  const where = ranges
    .map((r) => `(kafka_partition = ${r.partition} AND kafka_offset >= ${r.from} AND kafka_offset < ${r.to})`)
    .join(" OR ");
  let lines: AsyncIterator<string> | null = null;
  let pending: [number, number] | null = null;
  const nextRow = async (): Promise<[number, number] | null> => {
    if (pending) {
      const p = pending;
      pending = null;
      return p;
    }
    lines ??= streamLines(
      ch,
      `SELECT kafka_partition, kafka_offset FROM ${offsetsTable} WHERE ${where || "0"} ` +
        "ORDER BY kafka_partition, kafka_offset",
    );
    const r = await lines.next();
    if (r.done) return null;
    const [p, o] = r.value.split("\t").map(Number) as [number, number];
    return [p, o];
  };
  return {
    async *of(partition: number): AsyncGenerator<number> {
      for (;;) {
        const row = await nextRow();
        if (row === null) return;
        if (row[0] < partition) continue;
        if (row[0] > partition) {
          pending = row;
          return;
        }
        yield row[1];
      }
    },
  };
}

async function* streamLines(ch: ClickHouseClient, query: string): AsyncGenerator<string> {
  const rs = await ch.query({
    query,
    format: "TabSeparated",
    clickhouse_settings: { max_bytes_before_external_sort: String(1 << 30) },
  });
  for await (const rows of rs.stream() as AsyncIterable<Array<{ text: string }>>)
    for (const row of rows) yield row.text;
}

/**
 * The DLQ's source offsets for the audited ranges, sorted, by partition; with a provenance key only
 * envelopes whose MAC is right, and how many were not (`unproven`: forged, or written without it).
 */
export async function deadLetteredOffsets(
  consumer: Consumer,
  dlqTopic: string,
  dlqPartitions: number,
  rawTopic: string,
  ranges: readonly Range[],
  onProgress: (read: number, total: number) => void = () => {},
  key?: ProvenanceKey,
  resume?: {
    /** Where each DLQ partition's read starts (audit/position.ts); the low watermark where absent. */
    starts?: ReadonlyMap<number, number>;
    /** Every envelope of the raw topic read, wanted or not, with where it lies in the DLQ. */
    seen?: (source: { partition: number; offset: number }, at: DlqPosition) => void;
  },
): Promise<{
  offsets: Map<number, Float64Array>;
  unproven: number;
  digests: Map<number, Map<number, string>>;
  next: Map<number, number>;
}> {
  const byPartition = new Map(ranges.map((r) => [r.partition, r]));
  const starts = resume?.starts;
  const found = await sourceOffsets(
    consumer,
    dlqTopic,
    dlqPartitions,
    rawTopic,
    starts ? { starts: new Map(Array.from({ length: dlqPartitions }, (_, p) => [p, starts.get(p) ?? 0])) } : {},
    (p, o, at) => {
      resume?.seen?.({ partition: p, offset: o }, at);
      const r = byPartition.get(p);
      return r !== undefined && o >= r.from && o < r.to;
    },
    (p) => onProgress(p.read, p.total),
    key,
  );
  const offsets = new Map([...found.offsets].map(([p, list]) => [p, Float64Array.from(list).sort()]));
  return { offsets, unproven: found.unproven, digests: found.digests, next: found.next };
}

export async function* ascending(values: ArrayLike<number> | undefined): AsyncGenerator<number> {
  if (values) for (let i = 0; i < values.length; i++) yield values[i]!;
}
