/**
 * The DLQ breaker (breaker.ts) at work: it counts where each record ended, pauses consumption when
 * it trips, and holds a batch whose envelopes would trip it (or go while it is tripped) until
 * ClickHouse takes the batch whole or the operator resets the breaker. Tripped, the loop goes on
 * polling (the group keeps the member), flushing and committing what was consumed before the trip;
 * records wait in Kafka until the operator's word or a restart.
 */
import type { Clock } from "../time/clock.ts";
import { log } from "../log.ts";
import { DlqBreaker } from "./breaker.ts";
import type { Gate } from "./gate.ts";

/** How often a batch the DLQ breaker holds is tried again. */
export const HOLD_RETRY_MS = 5_000;

export class BreakerHold {
  readonly #breaker: DlqBreaker;
  readonly #maxRatio: number;
  readonly #gate: Gate;
  readonly #clock: Clock;
  /** Counts the operator's resets of the breaker: a batch held before one goes its usual way. */
  #released = 0;
  /** The waits of held batches, cut short by a reset. */
  readonly #heldWaiting: Array<() => void> = [];

  constructor(maxRatio: number, window: number, gate: Gate, clock: Clock) {
    this.#breaker = new DlqBreaker(maxRatio, window);
    this.#maxRatio = maxRatio;
    this.#gate = gate;
    this.#clock = clock;
  }

  get ratio(): number {
    return this.#breaker.ratio;
  }

  get tripped(): boolean {
    return this.#breaker.tripped;
  }

  /** A decoder's rejection, dead-lettered. */
  rejected(): void {
    if (this.#breaker.record(true)) this.#trip();
  }

  /** A batch settled: its rows stored and its rows dead-lettered, each counted once. */
  settled(stored: number, dead: number): void {
    if (this.#breaker.recordMany(stored, false) || this.#breaker.recordMany(dead, true)) this.#trip();
  }

  /** Paused, not stopped: consumption waits for the operator's word (reset) or a restart. */
  #trip(): void {
    this.#gate.closeAll("breaker");
    log.error(
      "DLQ circuit breaker tripped: consumption paused; fix the producer or the table, then reset it " +
        "(cdr-worker probe --post http://127.0.0.1:<STATS_PORT>/internal/breaker/reset) or restart",
      { ratio: this.#breaker.ratio, max_ratio: this.#maxRatio },
    );
  }

  /** The operator's word: the breaker's window starts anew and consumption resumes. False if it was not tripped. */
  reset(): boolean {
    if (!this.#breaker.tripped) return false;
    this.#breaker.reset();
    this.#gate.openAll("breaker");
    // Batches held meanwhile go their usual way now, their envelopes counted in the new window.
    this.#released++;
    for (const go of [...this.#heldWaiting]) go();
    log.info("DLQ circuit breaker reset by the operator; consumption resumed");
    return true;
  }

  /**
   * A batch whose envelopes would trip the breaker (or go while it is tripped) is held: the breaker
   * trips, consumption pauses, and the batch is tried again every HOLD_RETRY_MS (true), until
   * ClickHouse takes it whole (taken) or the operator resets the breaker (false: it goes on).
   */
  async hold(stored: number, dead: number, signal: AbortSignal): Promise<boolean> {
    const epoch = this.#released;
    if (!this.#breaker.wouldTrip(stored, dead)) return false;
    if (!this.#breaker.tripped) {
      this.#breaker.hold();
      this.#trip();
    }
    log.warn("a batch whose envelopes the DLQ breaker would not let through is held and tried again", {
      rows: stored + dead,
      dead,
      retry_ms: HOLD_RETRY_MS,
    });
    await new Promise<void>((go) => {
      const done = () => {
        cancel();
        signal.removeEventListener("abort", done);
        const at = this.#heldWaiting.indexOf(done);
        if (at >= 0) this.#heldWaiting.splice(at, 1);
        go();
      };
      const cancel = this.#clock.setTimeout(done, HOLD_RETRY_MS);
      signal.addEventListener("abort", done);
      this.#heldWaiting.push(done);
    });
    return this.#released === epoch && !signal.aborted;
  }

  /** A held batch was taken whole: what tripped the breaker is gone, consumption resumes. */
  taken(): void {
    if (!this.#breaker.tripped) return;
    this.#breaker.reset();
    this.#gate.openAll("breaker");
    log.info("a batch the DLQ breaker held was taken whole by ClickHouse; the breaker is reset, consumption resumed");
  }
}
