// One StatsSource of known values, for the stats answer's and the metrics' unit tests.
import { Counters } from "../../src/stats/counters.ts";
import type { StatsSource } from "../../src/stats/snapshot.ts";

export function statsSource(): StatsSource {
  const counters = new Counters();
  counters.consumed = 10;
  const p0 = counters.partition(0);
  Object.assign(p0, { consumed: 10, durableClickhouse: 6, durableDlq: 1 });
  counters.replaysSkipped = 4;
  return {
    counters,
    version: "0.2.0",
    workerInstance: "w1",
    topic: "cdr.raw",
    state: () => "running",
    bufferedRows: () => 3,
    positions: () => new Map([[0, { committed: 7, consumed: 10 }]]),
    assignment: () => [0],
    highWatermark: () => 12,
    phoneCache: () => ({ hits: 0, misses: 0, size: 0 }),
    breakerRatio: () => 0,
    eventLoopLagMs: () => 1,
    ready: () => ({ ready: true, reasons: [] }),
    delivery: "exactly-once",
    replayChecksPending: () => 1,
    audit: () => ({
      runs: { clean: 2, failed: 1, error: 0 },
      last: { at: 1_764_000_000_000, seconds: 1.23, result: "failed", findings: { missing: 0, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 } },
    }),
  };
}
