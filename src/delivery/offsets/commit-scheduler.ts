/**
 * Commits what the tracker says is durable, one commit at a time. Acknowledgements arrive in
 * bursts (a flush, thousands of DLQ deliveries): a request while a commit runs only marks that
 * one more round is wanted, so a burst costs one or two commits, never one per acknowledgement.
 * With `spacingMs`, a commit starts no sooner than that after the one before it began: what is
 * acknowledged meanwhile goes in the next. A transactional commit costs the broker a transaction
 * (its log entries, a marker on every partition it touched): 4–5 ms of Kafka's CPU against about
 * 1 ms for a plain commit of the same envelopes (scripts/bench/transaction-cost.ts), while one
 * takes about 10 ms; back to back behind small inserts they would keep a broker core a third busy.
 */
import { systemClock, type Clock } from "../../time/clock.ts";
import type { Advanced, OffsetTracker } from "./tracker.ts";

export interface CommitSpacing {
  /** The least time from one commit's start to the next one's. */
  spacingMs: number;
  clock?: Pick<Clock, "mono" | "sleep">;
}

export type CommitFn = (positions: Advanced[]) => Promise<void>;

export class CommitScheduler {
  readonly #tracker: OffsetTracker;
  readonly #commit: CommitFn;
  readonly #onError: (e: unknown) => void;
  readonly #spacingMs: number;
  readonly #clock: Pick<Clock, "mono" | "sleep">;
  /** When the last commit began (clock.mono); -Infinity before the first. */
  #lastStart = -Infinity;
  #running: Promise<void> | null = null;
  #again = false;
  #stopped = false;

  constructor(tracker: OffsetTracker, commit: CommitFn, onError: (e: unknown) => void, spacing?: CommitSpacing) {
    this.#tracker = tracker;
    this.#commit = commit;
    this.#onError = onError;
    this.#spacingMs = spacing?.spacingMs ?? 0;
    this.#clock = spacing?.clock ?? systemClock;
  }

  /** Commits every position that advanced, now or right after the commit under way. */
  schedule(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop();
  }

  /** Resolves once no commit runs and none is wanted. */
  async settled(): Promise<void> {
    while (this.#running) await this.#running;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** No commit after this (a fatal error: nothing further may be made to look durable). */
  stop(): void {
    this.#stopped = true;
  }

  async #loop(): Promise<void> {
    // Yield first so #running is assigned before the loop can finish and clear it.
    await Promise.resolve();
    try {
      do {
        const wait = this.#lastStart + this.#spacingMs - this.#clock.mono();
        if (wait > 0) await this.#clock.sleep(wait);
        this.#again = false;
        const advanced = this.#tracker.advanced();
        if (advanced.length > 0 && !this.#stopped) {
          this.#lastStart = this.#clock.mono();
          await this.#commit(advanced);
        }
      } while (this.#again && !this.#stopped);
    } catch (e) {
      this.#onError(e);
    } finally {
      this.#running = null;
    }
  }
}
