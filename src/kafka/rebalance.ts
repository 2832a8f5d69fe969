/**
 * A group member's side of a rebalance. librdkafka calls rebalance_cb inside
 * consume_batch_queue on the JS thread. An assignment is applied at once; a revocation is only
 * recorded and the call yields, so the caller can flush and commit the revoked partitions (async
 * work) before `completeRevoke()` gives them up. The caller hears of them on one channel each:
 * `takeAssigned()` for what was added, `pendingRevoke` for what must be given up, and `revokeLost`
 * when librdkafka says the group has already given them to others (rd_kafka_assignment_lost: the
 * session ran out, or max.poll.interval.ms): then nothing of them may be flushed. Eager protocols
 * replace the whole assignment, incremental ones (cooperative-sticky, KIP-848's
 * `group.protocol=consumer`) add and remove.
 */
import type { Pointer } from "bun:ffi";
import type { KafkaError } from "../errors.ts";
import { log } from "../log.ts";
import { errName, kafkaError, takeError } from "./handle.ts";
import { rdk } from "./native.ts";
import { fromNativeList, withNativeList, type TopicPartition } from "./partition-list.ts";
import { RD } from "./structs.ts";

export class Rebalance {
  readonly #rk: () => Pointer;
  #assignment: TopicPartition[] = [];
  #pendingRevoke: TopicPartition[] | null = null;
  #revokeLost = false;
  #assigned: TopicPartition[][] = [];
  /** While the consumer closes, revocations are given up at once: nothing is left to commit. */
  closing = false;
  /** Newly assigned partitions are paused in the callback (ConsumerOptions.assignPaused). */
  assignPaused = false;

  constructor(rk: () => Pointer) {
    this.#rk = rk;
  }

  get assignment(): readonly TopicPartition[] {
    return this.#assignment;
  }

  get pendingRevoke(): readonly TopicPartition[] | null {
    return this.#pendingRevoke;
  }

  /** The pending revocation is of an assignment the group already took away (a zombie's). */
  get revokeLost(): boolean {
    // Also asked live: librdkafka may mark a loss while the revocation is settling without calling
    // back again (the group was already rebalancing).
    return this.#revokeLost || (this.#pendingRevoke !== null && rdk().rd_kafka_assignment_lost(this.#rk()) === 1);
  }

  /** The partitions each assignment since the last call added, oldest first. */
  takeAssigned(): TopicPartition[][] {
    const a = this.#assigned;
    this.#assigned = [];
    return a;
  }

  /** Gives up the pending revoked partitions; call after their offsets are committed. */
  completeRevoke(): void {
    const revoked = this.#pendingRevoke;
    if (!revoked) return;
    this.#pendingRevoke = null;
    this.#revokeLost = false;
    this.#unassign(revoked);
  }

  /** The rebalance_cb. */
  onRebalance(rk: Pointer, err: number, list: Pointer): void {
    const lib = rdk();
    // The list belongs to librdkafka and dies after this callback: copy it out.
    const partitions = fromNativeList(list).map(({ topic, partition }) => ({ topic, partition }));
    if (err === RD.ERR__ASSIGN_PARTITIONS) {
      const cooperative = this.#cooperative;
      const e = cooperative
        ? takeError("KAFKA_CLIENT", "incremental_assign", lib.rd_kafka_incremental_assign(rk, list))
        : codeError(lib.rd_kafka_assign(rk, list));
      if (e) log.error("assign failed", { err: e });
      // Paused before the callback returns: the version barrier the pause sets drops anything
      // fetched for them, so no record of theirs comes out before the caller resumes them.
      else if (this.assignPaused) {
        const paused = lib.rd_kafka_pause_partitions(rk, list);
        if (paused !== 0)
          log.error("pausing newly assigned partitions failed", { err: kafkaError("KAFKA_CLIENT", "pause", paused) });
      }
      this.#assignment = cooperative ? [...this.#assignment, ...partitions] : partitions;
      this.#assigned.push(partitions);
      log.info("partitions assigned", { partitions: partitions.map((p) => `${p.topic}[${p.partition}]`) });
      return;
    }
    if (err === RD.ERR__REVOKE_PARTITIONS && !this.closing) {
      // A loss may follow a revocation still being settled (the loop polls meanwhile): it covers
      // the whole assignment, and it sticks until the revocation completes.
      const lost = lib.rd_kafka_assignment_lost(rk) === 1;
      this.#pendingRevoke = union(this.#pendingRevoke ?? [], partitions);
      this.#revokeLost ||= lost;
      const named = partitions.map((p) => `${p.topic}[${p.partition}]`);
      if (lost) log.warn("partitions lost: the group gave them to others; dropping what is held of them", {
          partitions: named,
        });
      else log.info("partitions revoked; committing before release", { partitions: named });
      lib.rd_kafka_yield(rk);
      return;
    }
    if (err !== RD.ERR__REVOKE_PARTITIONS) log.warn("rebalance error", { code: errName(err) });
    this.#unassign(partitions);
  }

  /**
   * Whether assignments change incrementally. Under the KIP-848 protocol librdkafka knows this
   * only once the group is joined, so it is asked at each rebalance rather than at start.
   */
  get #cooperative(): boolean {
    return String(rdk().rd_kafka_rebalance_protocol(this.#rk())) === "COOPERATIVE";
  }

  #unassign(partitions: TopicPartition[]): void {
    const lib = rdk();
    if (this.#cooperative) {
      const e = withNativeList(partitions, (list) =>
        takeError("KAFKA_CLIENT", "incremental_unassign", lib.rd_kafka_incremental_unassign(this.#rk(), list)),
      );
      if (e) log.error("unassign failed", { err: e });
      const gone = new Set(partitions.map((p) => `${p.topic}\0${p.partition}`));
      this.#assignment = this.#assignment.filter((p) => !gone.has(`${p.topic}\0${p.partition}`));
    } else {
      const e = codeError(lib.rd_kafka_assign(this.#rk(), null));
      if (e) log.error("unassign failed", { err: e });
      this.#assignment = [];
    }
  }
}

function union(a: TopicPartition[], b: TopicPartition[]): TopicPartition[] {
  const key = (p: TopicPartition) => `${p.topic}\0${p.partition}`;
  const seen = new Set(a.map(key));
  return [...a, ...b.filter((p) => !seen.has(key(p)))];
}

function codeError(err: number): KafkaError | null {
  return err === 0 ? null : kafkaError("KAFKA_CLIENT", "assign", err);
}
