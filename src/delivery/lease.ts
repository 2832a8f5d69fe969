/**
 * Whether the worker may still act as the owner of its partitions. The group takes them away from
 * a member silent past session.timeout.ms (or polling nothing for max.poll.interval.ms), and
 * librdkafka says so (a lost revocation) only once its threads run again. A process frozen whole
 * (SIGSTOP, a paused VM, a suspended host) wakes with its timers due: without this, it would flush
 * what it held, or resend an insert whose answer timed out meanwhile, before it hears. So the
 * worker watches its own clocks: a gap between two looks longer than `suspectAfterMs` (half the
 * session) means it may have been frozen. Then for `verdictMs` nothing is sent and consumption is
 * paused, while the loop polls to hear librdkafka's verdict: librdkafka checks its session at least
 * once a second and its overdue heartbeat goes at once. A loss drops what is held (Delivery.abandon);
 * otherwise the work goes on where it stopped. A long synchronous call looks the same and costs
 * the same short pause, never a record.
 *
 * The clocks are looked at by the poll loop on every pass (at least every 50 ms while it runs), by
 * the loops that settle a revocation or drain, and before every insert: no timer of its own, so a
 * Delivery that is never run or stopped leaves nothing behind, and whatever runs first after a
 * freeze sees it. The first look starts the watch: a start that waited for the brokers is no gap.
 */
import { systemClock, type Clock } from "../time/clock.ts";
import { log } from "../log.ts";

/** How long sends wait after a gap, for librdkafka to say whether the assignment was lost. */
export const VERDICT_MS = 3_000;

export interface LeaseEvents {
  /** A gap was seen: pause consumption. */
  onHold: (gapMs: number) => void;
  /** The verdict window passed: resume. */
  onClear: () => void;
}

export class Lease {
  readonly #suspectAfterMs: number;
  readonly #verdictMs: number;
  readonly #events: LeaseEvents;
  readonly #clock: Clock;
  /** The clocks at the last look; none before the first (start-up, waiting for the brokers, is no freeze). */
  #mono: number | null = null;
  #wall = 0;
  #holdUntil = 0;
  #clear: Promise<void> = Promise.resolve();

  constructor(suspectAfterMs: number, events: LeaseEvents, verdictMs = VERDICT_MS, clock: Clock = systemClock) {
    this.#clock = clock;
    this.#suspectAfterMs = suspectAfterMs;
    this.#verdictMs = verdictMs;
    this.#events = events;
  }

  /** Looks at the clocks; true while sends must wait. Cheap: called before every send. */
  look(): boolean {
    const mono = this.#clock.mono(), wall = this.#clock.now();
    // The wall clock too: a suspended host's monotonic clock stands still while the broker's runs.
    const gap = this.#mono === null ? 0 : Math.max(mono - this.#mono, wall - this.#wall);
    this.#mono = mono;
    this.#wall = wall;
    if (gap > this.#suspectAfterMs) this.#hold(gap);
    return mono < this.#holdUntil;
  }

  /** Resolves once sends may go (at once unless a gap was seen within the verdict window). */
  clear(): Promise<void> {
    return this.look() ? this.#clear : Promise.resolve();
  }

  #hold(gapMs: number): void {
    const holding = this.#clock.mono() < this.#holdUntil;
    this.#holdUntil = this.#clock.mono() + this.#verdictMs;
    log.warn("the worker did not run for longer than half its session; sends wait for the group's verdict", {
      gap_ms: Math.round(gapMs),
      wait_ms: this.#verdictMs,
    });
    this.#events.onHold(gapMs);
    if (holding) return;
    this.#clear = new Promise<void>((resolve) => {
      const check = () => {
        const left = this.#holdUntil - this.#clock.mono();
        if (left > 0) return void this.#clock.setTimeout(check, left);
        this.#events.onClear();
        resolve();
      };
      this.#clock.setTimeout(check, this.#verdictMs);
    });
  }
}
