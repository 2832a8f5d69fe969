// The DLQ table filler's consumer as a test drives it (src/dlq-table/filler.ts FillerConsumer): a
// member whose heartbeats are accepted on every poll, its records, assignments and revocations as
// the test says, its commits recorded. For the filler's unit tests and its tests on real servers.
import type { FillerConsumer } from "../../src/dlq-table/filler.ts";
import type { Standing } from "../../src/kafka/heartbeat-proof.ts";
import type { Message } from "../../src/kafka/message.ts";
import type { TopicPartition } from "../../src/kafka/partition-list.ts";

/** A member whose heartbeats are accepted on every poll; records, assignments and revocations as the test says. */
export class FakeConsumer implements FillerConsumer {
  queue: Message[] = [];
  assigned: TopicPartition[][] = [];
  pendingRevoke: readonly TopicPartition[] | null = null;
  revokesCompleted = 0;
  commits: TopicPartition[] = [];
  /** While set, commits wait for it: a broker slow to answer. */
  commitHold: Promise<void> | null = null;
  events: string[] = [];
  paused = new Set<number>();
  /** Each partition's end as the fetcher last saw it; unknown where absent. */
  high = new Map<number, number>();
  #standing: Array<(s: Standing) => void> = [];
  takeAssigned() {
    const a = this.assigned;
    this.assigned = [];
    for (const ps of a) for (const t of ps) this.paused.add(t.partition);
    return a;
  }
  completeRevoke() {
    this.pendingRevoke = null;
    this.revokesCompleted++;
  }
  poll(max = 512) {
    for (const fn of this.#standing) fn({ kind: "accepted", sentAfter: performance.now(), rebalanceSince: null });
    const out: Message[] = [];
    while (out.length < max && this.queue.length && !this.paused.has(this.queue[0]!.partition)) out.push(this.queue.shift()!);
    return out;
  }
  pause(ps: readonly TopicPartition[]) {
    for (const t of ps) this.paused.add(t.partition);
  }
  resume(ps: readonly TopicPartition[]) {
    for (const t of ps) this.paused.delete(t.partition);
  }
  async commit(offsets: readonly TopicPartition[]) {
    if (this.commitHold) await this.commitHold;
    this.commits.push(...offsets);
    this.events.push(`committed ${offsets.map((o) => `${o.partition}:${o.offset}`).join(",")}`);
    return [...offsets];
  }
  async waitForMessages(ms: number) {
    await Bun.sleep(Math.min(ms, 5));
  }
  wake() {}
  /** Where the fetcher stands past what it handed out (markers included); the handed out's end where absent. */
  position = new Map<number, number>();
  positions(ps: readonly TopicPartition[]) {
    return ps.map((t) => ({ ...t, offset: BigInt(this.position.get(t.partition) ?? -1001) }));
  }
  watermarks(_topic: string, partition: number) {
    const high = this.high.get(partition);
    return high === undefined ? null : { low: 0, high };
  }
  onStanding(fn: (s: Standing) => void) {
    this.#standing.push(fn);
  }
  async close() {
    this.events.push("closed");
    return true;
  }
}

