/**
 * Why consumption is paused, the one place that pauses and resumes the consumer's partitions.
 * Reasons that hold for every partition (the DLQ breaker tripped; a batch waits for an unreachable
 * ClickHouse; a revocation settles; the worker may have been frozen, lease.ts; a send waits for a
 * proof of membership, membership.ts) and reasons of some
 * partitions (a replay check under way) add up: a partition fetches again only once no reason
 * holds for it, so lifting one reason never resumes what another still holds.
 */
import type { TopicPartition } from "../kafka/partition-list.ts";

export type PauseReason = "breaker" | "clickhouse" | "replay-check" | "revoke" | "lease" | "membership";

export interface Pausable {
  readonly assignment: readonly TopicPartition[];
  pause(partitions: readonly TopicPartition[]): void;
  resume(partitions: readonly TopicPartition[]): void;
}

export class Gate {
  readonly #consumer: Pausable;
  readonly #all = new Set<PauseReason>();
  readonly #some = new Map<number, Set<PauseReason>>();

  constructor(consumer: Pausable) {
    this.#consumer = consumer;
  }

  /** What holds `partition` paused now, for stats: a stalled partition that nothing holds is librdkafka's. */
  heldBy(partition: number): PauseReason[] {
    return [...this.#all, ...(this.#some.get(partition) ?? [])];
  }

  /** Partitions held by `reason` alone (the replay check's), for stats. */
  count(reason: PauseReason): number {
    let n = 0;
    for (const r of this.#some.values()) if (r.has(reason)) n++;
    return n;
  }

  closeAll(reason: PauseReason): void {
    this.#all.add(reason);
    this.#consumer.pause(this.#consumer.assignment);
  }

  openAll(reason: PauseReason): void {
    if (!this.#all.delete(reason)) return;
    this.#resume(this.#consumer.assignment);
  }

  close(partitions: readonly TopicPartition[], reason: PauseReason): void {
    for (const { partition } of partitions) {
      let r = this.#some.get(partition);
      if (!r) this.#some.set(partition, (r = new Set()));
      r.add(reason);
    }
    this.#consumer.pause(partitions);
  }

  open(partitions: readonly TopicPartition[], reason: PauseReason): void {
    for (const { partition } of partitions) {
      const r = this.#some.get(partition);
      if (r?.delete(reason) && r.size === 0) this.#some.delete(partition);
    }
    this.#resume(partitions);
  }

  /**
   * Newly assigned partitions: paused while a reason holds for them or for every partition, else
   * resumed (the consumer may hand them over paused: ConsumerOptions.assignPaused).
   */
  assigned(partitions: readonly TopicPartition[]): void {
    if (this.#all.size > 0) this.#consumer.pause(partitions);
    else this.#resume(partitions);
  }

  /** Revoked partitions: their reasons go with them. */
  forget(partitions: readonly TopicPartition[]): void {
    for (const { partition } of partitions) this.#some.delete(partition);
  }

  #resume(partitions: readonly TopicPartition[]): void {
    if (this.#all.size > 0) return;
    const free = partitions.filter((t) => !this.#some.has(t.partition));
    if (free.length > 0) this.#consumer.resume(free);
  }
}
