// The stats answer and the metrics, computed from one StatsSource without services: the per-
// partition identity, lag, the delivery mode and the scheduled audit's last result.
import { expect, setDefaultTimeout, test } from "bun:test";
import { metricsText } from "../../src/stats/metrics.ts";
import { Counters } from "../../src/stats/counters.ts";
import { statsSnapshot, type StatsSource } from "../../src/stats/snapshot.ts";

setDefaultTimeout(60_000);

function source(): StatsSource {
  const counters = new Counters();
  counters.consumed = 10;
  const p0 = counters.partition(0);
  Object.assign(p0, { consumed: 10, durableClickhouse: 6, durableDlq: 1 });
  counters.replaysSkipped = 4;
  return {
    counters,
    version: "0.1.0",
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

test("per partition: consumed = durable + in flight, lag from the high watermark and the commit", () => {
  const s = statsSnapshot(source());
  expect(s.partitions["0"]).toEqual({ consumed: 10, durable_clickhouse: 6, durable_dlq: 1, in_flight: 3, committed_offset: 7, high_watermark: 12, lag: 5 });
  expect([s.delivery, s.replays_skipped, s.replay_checks_pending]).toEqual(["exactly-once", 4, 1]);
  expect(s.last_audit).toEqual({ at: "2025-11-24T16:00:00.000Z", seconds: 1.2, result: "failed", findings: { missing: 0, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 } });
});

test("the metrics say the same: lag, mode, replays skipped, the audit's runs and findings", () => {
  const m = metricsText(source());
  for (const line of [
    'cdr_worker_partition_lag{partition="0"} 5',
    "cdr_worker_exactly_once 1",
    "cdr_worker_replays_skipped_total 4",
    "cdr_worker_replay_checks_pending 1",
    'cdr_worker_audit_runs_total{result="failed"} 1',
    'cdr_worker_audit_findings{finding="stored_twice"} 1',
    "cdr_worker_audit_last_run_timestamp_seconds 1764000000",
  ])
    expect(m.split("\n")).toContain(line);
});
