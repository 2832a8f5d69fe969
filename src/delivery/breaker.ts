/**
 * DLQ-rate circuit breaker: the share of dead-lettered records over the last `window` records, each
 * counted once by where it ended: the decoder's rejections when they are refused, a valid record
 * when its batch settles (stored, or refused by ClickHouse and dead-lettered). When a bad upstream
 * deploy turns most records invalid, or the table refuses most rows, pausing beats pouring the
 * stream into the DLQ. Tripped, it stays so until `reset` (the operator's word) or a restart. A
 * ratio of 1 (the binary's default) never trips.
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

  /** Whether the DLQ share went over the ratio; once tripped it stays so until reset. */
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

  /** Records `n` outcomes alike; true when one of them tripped the breaker. */
  recordMany(n: number, dead: boolean): boolean {
    let tripped = false;
    for (let i = 0; i < n && !this.#tripped; i++) tripped = this.record(dead) || tripped;
    return tripped;
  }

  /** Whether these outcomes would trip it; nothing recorded. */
  wouldTrip(stored: number, dead: number): boolean {
    if (this.#maxRatio >= 1) return false;
    if (this.#tripped) return true;
    const copy = new DlqBreaker(this.#maxRatio, this.#window.length);
    copy.#window.set(this.#window);
    [copy.#index, copy.#filled, copy.#dlq] = [this.#index, this.#filled, this.#dlq];
    return copy.recordMany(stored, false) || copy.recordMany(dead, true);
  }

  /** Tripped by a batch held rather than sent (Delivery): its rows are not recorded. */
  hold(): void {
    if (this.#maxRatio < 1) this.#tripped = true;
  }

  /** The operator's word: the window starts empty and the breaker closed. */
  reset(): void {
    this.#window.fill(0);
    this.#index = 0;
    this.#filled = 0;
    this.#dlq = 0;
    this.#tripped = false;
  }

  get ratio(): number {
    return this.#filled === 0 ? 0 : this.#dlq / this.#filled;
  }
}
