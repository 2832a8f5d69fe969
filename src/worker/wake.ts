/**
 * One waiting point for the worker's loop: sleeps end early when something it waits for happens
 * (a flush or DLQ delivery settled, a stop, a fatal error). Waiting costs no CPU.
 */
export class Waker {
  #wake: (() => void) | null = null;

  /** Until `wake()`, or `ms` passed. */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.#wake = null;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(t);
        this.#wake = null;
        resolve();
      };
    });
  }

  /** Until `wake()` or `other` settles (it carries its own deadline: no second timer). */
  async race(other: Promise<unknown>): Promise<void> {
    const woken = new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
    await Promise.race([woken, other]);
    this.#wake = null;
  }

  wake(): void {
    this.#wake?.();
  }
}
