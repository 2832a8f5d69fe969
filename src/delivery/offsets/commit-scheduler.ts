/**
 * Commits what the tracker says is durable, one commit at a time. Acknowledgements arrive in
 * bursts (a flush, thousands of DLQ deliveries): a request while a commit runs only marks that
 * one more round is wanted, so a burst costs one or two commits, never one per acknowledgement.
 */
import type { Advanced, OffsetTracker } from "./tracker.ts";

export type CommitFn = (positions: Advanced[]) => Promise<void>;

export class CommitScheduler {
  readonly #tracker: OffsetTracker;
  readonly #commit: CommitFn;
  readonly #onError: (e: unknown) => void;
  #running: Promise<void> | null = null;
  #again = false;
  #stopped = false;

  constructor(tracker: OffsetTracker, commit: CommitFn, onError: (e: unknown) => void) {
    this.#tracker = tracker;
    this.#commit = commit;
    this.#onError = onError;
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
        this.#again = false;
        const advanced = this.#tracker.advanced();
        if (advanced.length > 0 && !this.#stopped) await this.#commit(advanced);
      } while (this.#again && !this.#stopped);
    } catch (e) {
      this.#onError(e);
    } finally {
      this.#running = null;
    }
  }
}
