/**
 * librdkafka's times (rd_clock, CLOCK_MONOTONIC µs) on the process's monotonic clock
 * (performance.now ms), for the membership facts its statistics carry (heartbeat-proof.ts).
 * Each time is placed by its age, read on both clocks at the moment of conversion: an offset
 * between them taken once would carry any step between the two clocks (a host suspended, which
 * one clock counts and the other may not) into every later fact, and leave each proof expired
 * before it is read, or alive past its end.
 */
import { rdClockUs } from "./libc.ts";

export interface ClockPair {
  /** librdkafka's clock now, µs. */
  rdNowUs(): number;
  /** The process's monotonic clock now, ms. */
  monoNowMs(): number;
}

const system: ClockPair = { rdNowUs: rdClockUs, monoNowMs: () => performance.now() };

/** A converter for the facts of one statistics reading: both clocks are read once, now. */
export function rdToMono(clocks: ClockPair = system): (us: number) => number {
  const rdNow = clocks.rdNowUs();
  const monoNow = clocks.monoNowMs();
  return (us) => monoNow - (rdNow - us) / 1_000;
}
