/**
 * Where the replay check asks the broker for offsets. With librdkafka 2.3 or later (the pinned
 * build) through the admin API, answered on a queue polled without blocking, so the event loop
 * serves /healthz and the partitions however slowly the broker answers. With an older library
 * named by LIBRDKAFKA_PATH through the consumer's blocking calls, as before those existed.
 */
import type { Admin } from "./admin.ts";
import type { Consumer } from "./consumer.ts";
import { rdkLookups } from "./native.ts";
import type { TopicPartition } from "./partition-list.ts";

export interface OffsetLookup {
  /** The group's committed offsets with their metadata and errors (-1001 where none is). */
  committed(group: string, partitions: readonly TopicPartition[]): Promise<TopicPartition[]>;
  /** First offsets, ends, or the first offset at or after a time in ms (-1 where none is). */
  listOffsets(
    topic: string,
    partitions: readonly number[],
    spec: "earliest" | "latest" | number,
  ): Promise<Map<number, number>>;
  /** Null for a topic the cluster does not have. */
  partitionCount(topic: string): Promise<number | null>;
}

/** `consumer` is the group's member: the blocking committed() reads its group's offsets. */
export function offsetLookup(admin: Admin, consumer: Consumer): OffsetLookup {
  if (rdkLookups()) return admin;
  return {
    committed: async (_group, partitions) => consumer.committed(partitions),
    listOffsets: async (topic, partitions, spec) => {
      if (typeof spec === "number") return consumer.offsetsForTimes(topic, partitions, spec);
      return new Map(
        partitions.map((p) => {
          const w = consumer.queryWatermarks(topic, p);
          return [p, spec === "earliest" ? w.low : w.high];
        }),
      );
    },
    partitionCount: async (topic) => admin.partitionCounts([topic]).get(topic) ?? null,
  };
}
