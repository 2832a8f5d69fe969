/**
 * Event-loop lag: how late a 100 ms timer fires. The worst of the last window (10 s) is what stats
 * report, so a stall between two scrapes is still seen.
 */
export class LoopLagMonitor {
  #lastWindowMax = 0;
  #windowMax = 0;
  #windowStart = Date.now();
  #expected = performance.now() + 100;
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(readonly windowMs = 10_000) {
    this.#timer = setInterval(() => this.#tick(), 100);
  }

  /** Worst lag, ms, over the last full window and the one under way. */
  get worstMs(): number {
    return Math.max(this.#lastWindowMax, this.#windowMax);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #tick(): void {
    const now = performance.now();
    this.#windowMax = Math.max(this.#windowMax, now - this.#expected);
    this.#expected = now + 100;
    if (Date.now() - this.#windowStart >= this.windowMs) {
      this.#lastWindowMax = this.#windowMax;
      this.#windowMax = 0;
      this.#windowStart = Date.now();
    }
  }
}
