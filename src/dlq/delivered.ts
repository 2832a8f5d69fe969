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
import { HEADERS } from "./envelope.ts";
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
  const source = (headers: Record<string, string>) => {
    if (headers[HEADERS.sourceTopic] !== rawTopic) return;
    const p = Number(headers[HEADERS.sourcePartition]);
    const o = Number(headers[HEADERS.sourceOffset]);
    const first = from.get(p);
    if (first === undefined || !(o >= first)) return;
    let list = out.get(p);
    if (!list) out.set(p, (list = []));
    list.push(o);
  };
  // The source is in the headers: an envelope whose body is not JSON still counts.
  const text = new TextDecoder();
  await readDlq(
    consumer,
    dlqTopic,
    dlqPartitions,
    { starts },
    (e) => source(e.headers),
    (m) => source(Object.fromEntries((m.headers ?? []).map(([k, v]) => [k, text.decode(v)]))),
  );
  return out;
}
