/**
 * The work the worker started and has not seen finish: flushes and DLQ sends. A failure of any of
 * them is fatal (reported once to `onError`); each one settling wakes the loop, since a slot or a
 * commit position may have come free.
 */
export class Pending {
  readonly #pending = new Set<Promise<void>>();
  readonly #onError: (e: unknown) => void;
  readonly #onSettled: () => void;

  constructor(onError: (e: unknown) => void, onSettled: () => void) {
    this.#onError = onError;
    this.#onSettled = onSettled;
  }

  get size(): number {
    return this.#pending.size;
  }

  add(work: Promise<void>): void {
    const tracked = work
      .catch((e) => this.#onError(e))
      .finally(() => {
        this.#pending.delete(tracked);
        this.#onSettled();
      });
    this.#pending.add(tracked);
  }

  /** Resolves when any pending work settles (at once when none is pending). */
  any(): Promise<void> {
    return this.#pending.size ? Promise.race(this.#pending) : Promise.resolve();
  }
}
