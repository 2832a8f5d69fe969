/**
 * The replay check's DLQ side (offsets/replay-check.ts): which records of the raw topic's
 * partitions, at or past each one's committed offset, already have an envelope. Envelopes carry
 * their source in headers, and are stamped with the producing worker's clock, the same clock
 * that stamped the commit's `since`: each DLQ partition is read from its first envelope at or
 * after the earliest `since` (a minute earlier, for timestamps of envelopes a slower producer
 * thread stamped) to its end.
 */
import type { RangeReader } from "../kafka/consumer.ts";
import type { OffsetLookup } from "../kafka/offset-lookup.ts";
import type { Message } from "../kafka/message.ts";
import type { DeadLettered, Owned } from "../ownership/delivered.ts";
import { envelopeSource } from "./envelope.ts";
import type { ProvenanceKey } from "./provenance-mac.ts";
import { readDlq, type OffsetRange, type ReadProgress } from "./reader.ts";

const SLACK_MS = 60_000;

/** What the DLQ says of the raw topic's records: offsets by partition, and with a key what it proved. */
export interface SourceOffsets {
  offsets: Map<number, number[]>;
  /** With a key: each proven offset's payload SHA-256, by partition. */
  digests: Map<number, Map<number, string>>;
  /** With a key: envelopes naming a wanted source without a valid MAC (forged, or from a worker without the key). */
  unproven: number;
  /** Per DLQ partition read, the offset after the last one read (reader.ts readDlq). */
  next: Map<number, number>;
}

/** Where an envelope lies in the DLQ topic. */
export interface DlqPosition {
  partition: number;
  offset: number;
}

/**
 * The source offsets of the raw topic's records that have an envelope, by partition, for those
 * `wanted` keeps: the DLQ read over `range` (reader.ts), the source taken from the headers (an
 * envelope whose body is not JSON still names it). With a provenance key only envelopes whose MAC
 * is right count (provenance-mac.ts); the others are counted apart. The replay check and the audit
 * both read it.
 */
export async function sourceOffsets(
  consumer: RangeReader,
  dlqTopic: string,
  dlqPartitions: number,
  rawTopic: string,
  range: OffsetRange,
  wanted: (partition: number, offset: number, at: DlqPosition) => boolean,
  onProgress?: (p: ReadProgress) => void,
  key?: ProvenanceKey,
): Promise<SourceOffsets> {
  const out: SourceOffsets = { offsets: new Map(), digests: new Map(), unproven: 0, next: new Map() };
  const source = (m: Message, at: DlqPosition) => {
    const src = envelopeSource(m.headers);
    if (!src || src.topic !== rawTopic || !wanted(src.partition, src.offset, at)) return;
    if (key) {
      // The whole envelope proven, or its source by an older form: either names the record.
      const digest = src.digest;
      if (digest === undefined || key.proves(src, m) === null) {
        out.unproven++;
        return;
      }
      let digests = out.digests.get(src.partition);
      if (!digests) out.digests.set(src.partition, (digests = new Map()));
      digests.set(src.offset, digest);
    }
    let list = out.offsets.get(src.partition);
    if (!list) out.offsets.set(src.partition, (list = []));
    list.push(src.offset);
  };
  out.next = await readDlq(
    consumer,
    dlqTopic,
    dlqPartitions,
    range,
    (e) => source(e.message, e),
    (m) => source(m, m),
    onProgress,
  );
  return out;
}

/**
 * What the DLQ holds of these partitions at or past each one's committed offset, produced since
 * `since`; with a key, only what it proves, and `onUnproven` hears how many envelopes it did not.
 * Where to start and end is asked through `lookup`, without blocking: the worker runs this while
 * it serves its partitions and its health endpoint.
 */
export async function deadLetteredOffsets(
  consumer: RangeReader,
  lookup: Pick<OffsetLookup, "listOffsets">,
  dlqTopic: string,
  dlqPartitions: number,
  rawTopic: string,
  owned: readonly Owned[],
  key?: ProvenanceKey,
  onUnproven: (n: number) => void = () => {},
): Promise<DeadLettered> {
  const since = Math.min(...owned.map((o) => o.since)) - SLACK_MS;
  const all = Array.from({ length: dlqPartitions }, (_, p) => p);
  const byTime = await lookup.listOffsets(dlqTopic, all, Math.max(0, since));
  const starts = new Map([...byTime].filter(([, o]) => o >= 0));
  if (starts.size === 0) return { offsets: new Map(), digests: new Map() };
  const watermarks = async (partitions: readonly number[]) => {
    const [low, high] = await Promise.all([
      lookup.listOffsets(dlqTopic, partitions, "earliest"),
      lookup.listOffsets(dlqTopic, partitions, "latest"),
    ]);
    return new Map(partitions.map((p) => [p, { low: low.get(p)!, high: high.get(p)! }]));
  };
  const from = new Map(owned.map((o) => [o.partition, o.from]));
  const found = await sourceOffsets(
    consumer,
    dlqTopic,
    dlqPartitions,
    rawTopic,
    { starts, watermarks },
    (p, o) => o >= (from.get(p) ?? Infinity),
    undefined,
    key,
  );
  if (found.unproven) onUnproven(found.unproven);
  return { offsets: found.offsets, digests: found.digests };
}
