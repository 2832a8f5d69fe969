/**
 * DLQ-rate circuit breaker: the share of dead-lettered records over the last `window` records.
 * When a bad upstream deploy turns most records invalid, stopping beats pouring the stream into
 * the DLQ. A ratio of 1 (the default) never trips.
 */
export class DlqBreaker {
  readonly #window: Uint8Array;
  readonly #maxRatio: number;
  #index = 0;
  #filled = 0;
  #dlq = 0;
  #tripped = false;

  constructor(maxRatio: number, window: number) {
    this.#maxRatio = maxRatio;
    this.#window = new Uint8Array(maxRatio < 1 ? window : 1);
  }

  /** Whether the DLQ share went over the ratio; once tripped it stays so until restart. */
  get tripped(): boolean {
    return this.#tripped;
  }

  /** Records one outcome; returns true when this record tripped the breaker. */
  record(dead: boolean): boolean {
    if (this.#maxRatio >= 1 || this.#tripped) return false;
    const w = this.#window;
    const bit = dead ? 1 : 0;
    this.#dlq += bit - w[this.#index]!;
    w[this.#index] = bit;
    this.#index = (this.#index + 1) % w.length;
    if (this.#filled < w.length) this.#filled++;
    if (this.#filled === w.length && this.#dlq / w.length > this.#maxRatio) this.#tripped = true;
    return this.#tripped;
  }

  get ratio(): number {
    return this.#filled === 0 ? 0 : this.#dlq / this.#filled;
  }
}
