/**
 * The replay check's DLQ side (offsets/replay-check.ts): which records of the raw topic's
 * partitions, at or past each one's committed offset, already have an envelope. Envelopes carry
 * their source in headers, and are stamped with the producing worker's clock, the same clock
 * that stamped the commit's `since`: each DLQ partition is read from its first envelope at or
 * after the earliest `since` (a minute earlier, for timestamps of envelopes a slower producer
 * thread stamped) to its end.
 */
import type { Consumer } from "../kafka/consumer.ts";
import type { DeliveredOffsets, Owned } from "../delivery/offsets/replay-check.ts";
import { envelopeSource } from "./envelope.ts";
import { readDlq, type OffsetRange, type ReadProgress } from "./reader.ts";

const SLACK_MS = 60_000;

/**
 * The source offsets of the raw topic's records that have an envelope, by partition, for those
 * `wanted` keeps: the DLQ read over `range` (reader.ts), the source taken from the headers (an
 * envelope whose body is not JSON still names it). The replay check and the audit both read it.
 */
export async function sourceOffsets(
  consumer: Consumer,
  dlqTopic: string,
  dlqPartitions: number,
  rawTopic: string,
  range: OffsetRange,
  wanted: (partition: number, offset: number) => boolean,
  onProgress?: (p: ReadProgress) => void,
): Promise<Map<number, number[]>> {
  const out = new Map<number, number[]>();
  const source = (headers: Parameters<typeof envelopeSource>[0]) => {
    const src = envelopeSource(headers);
    if (!src || src.topic !== rawTopic || !wanted(src.partition, src.offset)) return;
    let list = out.get(src.partition);
    if (!list) out.set(src.partition, (list = []));
    list.push(src.offset);
  };
  await readDlq(
    consumer,
    dlqTopic,
    dlqPartitions,
    range,
    (e) => source(e.headers),
    (m) => source(m.headers),
    onProgress,
  );
  return out;
}

/** What the DLQ holds of these partitions at or past each one's committed offset, produced since `since`. */
export async function deadLetteredOffsets(
  consumer: Consumer,
  dlqTopic: string,
  dlqPartitions: number,
  rawTopic: string,
  owned: readonly Owned[],
): Promise<DeliveredOffsets> {
  const since = Math.min(...owned.map((o) => o.since)) - SLACK_MS;
  const all = Array.from({ length: dlqPartitions }, (_, p) => p);
  const starts = new Map([...consumer.offsetsForTimes(dlqTopic, all, Math.max(0, since))].filter(([, o]) => o >= 0));
  if (starts.size === 0) return new Map();
  const from = new Map(owned.map((o) => [o.partition, o.from]));
  return sourceOffsets(
    consumer,
    dlqTopic,
    dlqPartitions,
    rawTopic,
    { starts },
    (p, o) => o >= (from.get(p) ?? Infinity),
  );
}
