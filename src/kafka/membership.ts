/**
 * A lease on the group's membership, from the coordinator's answers rather than from a guess. The
 * group gives a member's partitions to another only once the member's session ran out
 * (session.timeout.ms after the last heartbeat the coordinator received), or once a rebalance it is
 * in ran past the rebalance timeout (max.poll.interval.ms) without it: a classic member that did not
 * rejoin is removed, a KIP-848 member that did not revoke is fenced. The consumer's statistics say
 * which heartbeat the coordinator last accepted and when it was sent, and when a rebalance began
 * (kafka/heartbeat-proof.ts, facts librdkafka records). The lease runs to the earlier of that send
 * plus the session and that start plus the rebalance timeout, less a margin (an insert's bytes on
 * their way to the server, and the clocks' rates). An answer that refused a heartbeat, or lost it,
 * ends the lease at once: only a later accepted one renews it. Neither a commit nor an assignment is
 * a proof: a transactional commit is the producer's request and keeps no session, and the answer that
 * carried an assignment may have been held up past the session (by a cut from the brokers).
 *
 * Inserts and DLQ sends go only within the lease (Delivery's admit), and an insert's request is
 * ended at the lease's end, answered or not: its bytes reach ClickHouse within the lease or never,
 * so the margin covers only those already on their way. Past it, nothing is sent until a newer
 * heartbeat is accepted; the consumer heartbeats on its own, so an idle worker's lease stays renewed
 * at no cost. A worker cut off from Kafka but not from ClickHouse so stops sending before the group
 * can give its partitions to another, however late librdkafka declares the loss. The clock is the
 * monotonic one: its rate is assumed the coordinator's.
 */
import type { Standing } from "./heartbeat-proof.ts";
import { systemClock, type Clock } from "../time/clock.ts";

export interface LeaseTerms {
  sessionTimeoutMs: number;
  /** max.poll.interval.ms, which the member gives the group as its rebalance timeout. */
  rebalanceTimeoutMs: number;
}

/** The margin a lease ends before what the group allows: a tenth of the session, at least 2 s. */
function margin({ sessionTimeoutMs }: LeaseTerms): number {
  return Math.max(2_000, sessionTimeoutMs / 10);
}

/** The lease's length after a proof: the session less the margin. */
export function leaseLength(terms: LeaseTerms): number {
  return Math.max(0, terms.sessionTimeoutMs - margin(terms));
}

export class MembershipLease {
  #lengthMs: number;
  #rebalanceLengthMs: number;
  /** The last accepted standing: a change of the terms is applied to it at once. */
  #accepted: Standing | null = null;
  readonly #clock: Clock;
  /** Monotonic ms the lease ends at. */
  #until = Number.NEGATIVE_INFINITY;
  /** Sends waiting for a proof. */
  readonly #waiting = new Set<() => void>();
  readonly #onWaiting: (waiting: boolean) => void;

  /**
   * `onWaiting`: a send began waiting for a proof (true), or none waits any longer (false). The
   * proofs come only with the consumer's polls, which go on while sends wait (Delivery pauses
   * consumption instead).
   */
  constructor(terms: LeaseTerms, clock: Clock = systemClock, onWaiting: (waiting: boolean) => void = () => {}) {
    this.#lengthMs = leaseLength(terms);
    this.#rebalanceLengthMs = Math.max(0, terms.rebalanceTimeoutMs - margin(terms));
    this.#clock = clock;
    this.#onWaiting = onWaiting;
  }

  /**
   * The group's session changed (kafka/session-watch.ts, under KIP-848 the broker's to set): the
   * lease of the last accepted heartbeat is measured again, shorter at once if the session is.
   */
  setTerms(terms: LeaseTerms): void {
    this.#lengthMs = leaseLength(terms);
    this.#rebalanceLengthMs = Math.max(0, terms.rebalanceTimeoutMs - margin(terms));
    if (this.#accepted) this.stand(this.#accepted);
  }

  /** The member's standing as the coordinator last answered it: the lease renewed, or ended. */
  stand(standing: Standing): void {
    if (standing.kind !== "accepted") {
      this.#accepted = null;
      this.#until = Number.NEGATIVE_INFINITY;
      return;
    }
    this.#accepted = standing;
    const { sentAfter, rebalanceSince } = standing;
    const rebalanceEnd = rebalanceSince === null ? Infinity : rebalanceSince + this.#rebalanceLengthMs;
    this.#until = Math.min(sentAfter + this.#lengthMs, rebalanceEnd);
    if (!this.held) return;
    for (const w of [...this.#waiting]) w();
  }

  /** A send waits for a proof. */
  get waiting(): boolean {
    return this.#waiting.size > 0;
  }

  get held(): boolean {
    return this.#clock.mono() < this.#until;
  }

  /** Monotonic ms the lease ends at: an insert sent within it has its request ended then. */
  get until(): number {
    return this.#until;
  }

  /** Resolves once the lease holds, or once `signal` aborts (the partitions are gone). */
  async hold(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && !this.held) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.#waiting.delete(done);
          signal.removeEventListener("abort", done);
          // Told after the poll that served the proof has returned: consumption resumes only then, so
          // that poll, made while sends waited, hands out nothing.
          if (this.#waiting.size === 0) queueMicrotask(() => this.#waiting.size === 0 && this.#onWaiting(false));
          resolve();
        };
        this.#waiting.add(done);
        if (this.#waiting.size === 1) this.#onWaiting(true);
        signal.addEventListener("abort", done);
      });
    }
  }
}
