/**
 * Where librdkafka's fetcher stands for each partition of a topic, read from its statistics
 * (STATISTICS.md, `topics.<topic>.partitions.<partition>`). The worker's own view says what it
 * took and why it paused (delivery/gate.ts); this says what librdkafka is doing meanwhile. A
 * partition that takes nothing while nothing of the worker's holds it shows here whether
 * librdkafka still looks up where to start (`offset-query`, `offset-wait`), fetches (`active`),
 * or stopped, and how far it fetched.
 */
import { isObject } from "./json-object.ts";

export interface PartitionFetch {
  /** librdkafka's fetch_state: none, stopping, stopped, offset-query, offset-wait, validate-epoch-wait, active. */
  state: string;
  /** The next offset it fetches from (negative: a logical offset still to look up). */
  nextOffset: number;
  /** Records fetched and waiting in its queue for the worker's poll. */
  queued: number;
}

/** Each partition of `topic` the statistics name (not the unassigned pseudo-partition −1); null if they do not say. */
export function partitionFetches(stats: unknown, topic: string): Map<number, PartitionFetch> | null {
  if (!isObject(stats) || !isObject(stats.topics)) return null;
  const t = stats.topics[topic];
  if (!isObject(t) || !isObject(t.partitions)) return null;
  const out = new Map<number, PartitionFetch>();
  for (const [key, p] of Object.entries(t.partitions)) {
    const partition = Number(key);
    if (!Number.isSafeInteger(partition) || partition < 0 || !isObject(p)) continue;
    const { fetch_state: state, next_offset: nextOffset, fetchq_cnt: queued } = p;
    if (typeof state !== "string" || typeof nextOffset !== "number" || typeof queued !== "number") continue;
    out.set(partition, { state, nextOffset, queued });
  }
  return out;
}
