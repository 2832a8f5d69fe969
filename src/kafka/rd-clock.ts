/**
 * librdkafka's times (rd_clock, CLOCK_MONOTONIC µs) on the process's monotonic clock
 * (performance.now ms), for the membership facts its statistics carry (heartbeat-proof.ts).
 * The offset between the clocks is measured again at each statistics reading: one taken once
 * would carry any step between them (a host suspended, which one clock counts and the other may
 * not) into every later fact, and leave each proof expired before it is read, or alive past its
 * end. A measurement within STEP_MS of the one in use keeps it, so one fact reads the same each time.
 */
import { rdClockUs } from "./libc.ts";

export interface ClockPair {
  /** librdkafka's clock now, µs. */
  rdNowUs(): number;
  /** The process's monotonic clock now, ms. */
  monoNowMs(): number;
}

const system: ClockPair = { rdNowUs: rdClockUs, monoNowMs: () => performance.now() };

/** Less than any lease margin (2 s), more than a measurement's jitter (microseconds). */
const STEP_MS = 1;

export class RdClock {
  readonly #clocks: ClockPair;
  #offsetMs: number | null = null;

  constructor(clocks: ClockPair = system) {
    this.#clocks = clocks;
  }

  /** A converter for one statistics reading, on the offset as it stands now. */
  toMono(): (us: number) => number {
    const measured = this.#clocks.monoNowMs() - this.#clocks.rdNowUs() / 1_000;
    if (this.#offsetMs === null || Math.abs(measured - this.#offsetMs) > STEP_MS) this.#offsetMs = measured;
    const offset = this.#offsetMs;
    return (us) => us / 1_000 + offset;
  }
}
