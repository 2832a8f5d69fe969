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
import { readDlq } from "./reader.ts";

const SLACK_MS = 60_000;

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
  const from = new Map(owned.map((o) => [o.partition, o.from]));
  const out: DeliveredOffsets = new Map();
  if (starts.size === 0) return out;
  const source = (headers: Parameters<typeof envelopeSource>[0]) => {
    const src = envelopeSource(headers);
    const first = src && src.topic === rawTopic ? from.get(src.partition) : undefined;
    if (first === undefined || src!.offset < first) return;
    let list = out.get(src!.partition);
    if (!list) out.set(src!.partition, (list = []));
    list.push(src!.offset);
  };
  await readDlq(consumer, dlqTopic, dlqPartitions, { starts }, (e) => source(e.headers), (m) => source(m.headers));
  return out;
}
