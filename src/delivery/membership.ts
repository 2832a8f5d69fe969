/**
 * A lease on the group's membership, from the coordinator's answers rather than from a guess. The
 * group gives a member's partitions to another only once the member's session ran out:
 * session.timeout.ms after the last heartbeat the coordinator received. librdkafka shows no
 * heartbeat answer, but it shows commit answers, and a commit the coordinator accepted proves the
 * member was in the group when it arrived, its heartbeats going over the same connection every
 * heartbeat interval. So the session cannot run out before the commit's send time plus the
 * session, less one heartbeat interval; the lease ends a margin before that (an insert's time on
 * its way to the server, and the hand-over of an answer to the loop). An assignment proves
 * nothing: the answer that carried it may have been held up past the session (by a cut from the
 * brokers), and when it was sent is unknown.
 *
 * Inserts and DLQ sends go only within the lease (Delivery's admit), and an insert's request is
 * ended at the lease's end, answered or not: its bytes reach ClickHouse within the lease or never,
 * so the margin covers only those already on their way. Past it, the worker renews
 * with a commit of the positions it holds, and sends nothing until one is accepted. A worker cut
 * off from Kafka but not from ClickHouse so stops sending before the group can give its partitions
 * to another, however late librdkafka declares the loss; an idle worker's first send, and a new
 * assignment's, costs one commit. The clock is the monotonic one: its rate is assumed the
 * coordinator's.
 */
import { systemClock, type Clock } from "./clock.ts";

/** How long a renewal that failed waits before the next (commits refused while the group rebalances). */
const RENEW_RETRY_MS = 500;

export interface LeaseTerms {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
}

/** The lease's length after a proof: the session, less a heartbeat interval and the margin. */
export function leaseLength({ sessionTimeoutMs, heartbeatIntervalMs }: LeaseTerms): number {
  const margin = Math.max(2_000, sessionTimeoutMs / 10);
  return Math.max(0, sessionTimeoutMs - heartbeatIntervalMs - margin);
}

export class MembershipLease {
  readonly #lengthMs: number;
  /** Commits the positions held; true once the coordinator accepted (and `proven` was called). */
  readonly #renew: () => Promise<boolean>;
  readonly #clock: Clock;
  /** Monotonic ms the lease ends at. */
  #until = Number.NEGATIVE_INFINITY;
  #renewal: Promise<boolean> | null = null;

  constructor(terms: LeaseTerms, renew: () => Promise<boolean>, clock: Clock = systemClock) {
    this.#lengthMs = leaseLength(terms);
    this.#renew = renew;
    this.#clock = clock;
  }

  /** A coordinator's answer proved membership for a request sent at `sentAtMono`. */
  proven(sentAtMono: number): void {
    this.#until = Math.max(this.#until, sentAtMono + this.#lengthMs);
  }

  get held(): boolean {
    return this.#clock.mono() < this.#until;
  }

  /** Monotonic ms the lease ends at: an insert sent within it has its request ended then. */
  get until(): number {
    return this.#until;
  }

  /** Resolves once the lease holds, renewing it as needed, or once `signal` aborts (the partitions are gone). */
  async hold(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && !this.held) {
      this.#renewal ??= this.#renew().finally(() => (this.#renewal = null));
      const renewed = await this.#renewal;
      if (!renewed && !this.held && !signal.aborted) await this.#clock.sleep(RENEW_RETRY_MS);
    }
  }
}
