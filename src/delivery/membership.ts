/**
 * A lease on the group's membership, from the coordinator's answers rather than from a guess. The
 * group gives a member's partitions to another only once the member's session ran out:
 * session.timeout.ms after the last heartbeat the coordinator received. So the proof is a heartbeat
 * the coordinator accepted: librdkafka shows no heartbeat answer, but its statistics show the
 * coordinator connection's counters, from which kafka/heartbeat-proof.ts proves that a heartbeat sent
 * after a given instant was accepted. The session then runs at least until that instant plus the
 * session, and the lease ends a margin before (an insert's bytes on their way to the server, and
 * the clocks' rates). Neither a commit nor an assignment is a proof: a transactional commit is the
 * producer's request and keeps no session (the coordinator removes a member whose heartbeats stopped
 * however many commits it accepts from its producer), and the answer that carried an assignment
 * may have been held up past the session (by a cut from the brokers), its send time unknown.
 *
 * Inserts and DLQ sends go only within the lease (Delivery's admit), and an insert's request is
 * ended at the lease's end, answered or not: its bytes reach ClickHouse within the lease or never,
 * so the margin covers only those already on their way. Past it, nothing is sent until a newer
 * heartbeat is proven; the consumer heartbeats on its own, so an idle worker's lease stays renewed
 * at no cost. A worker cut off from Kafka but not from ClickHouse so stops sending before the group
 * can give its partitions to another, however late librdkafka declares the loss. The clock is the
 * monotonic one: its rate is assumed the coordinator's.
 */
import { systemClock, type Clock } from "./clock.ts";

export interface LeaseTerms {
  sessionTimeoutMs: number;
}

/** The lease's length after a proof: the session less a margin of a tenth of it, at least 2 s. */
export function leaseLength({ sessionTimeoutMs }: LeaseTerms): number {
  const margin = Math.max(2_000, sessionTimeoutMs / 10);
  return Math.max(0, sessionTimeoutMs - margin);
}

export class MembershipLease {
  readonly #lengthMs: number;
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
    this.#clock = clock;
    this.#onWaiting = onWaiting;
  }

  /** The coordinator accepted a heartbeat sent after `sentAfterMono`. */
  proven(sentAfterMono: number): void {
    this.#until = Math.max(this.#until, sentAfterMono + this.#lengthMs);
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
