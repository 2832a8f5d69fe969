// The stats answer from a StatsSource, without services: the per-partition identity, lag, the
// delivery mode and the scheduled audit's last result.
import { expect, setDefaultTimeout, test } from "bun:test";
import { statsSnapshot } from "../../src/stats/snapshot.ts";
import { statsSource as source } from "../support/stats-source.ts";

setDefaultTimeout(60_000);

test("per partition: consumed = durable + in flight, lag from the high watermark and the commit", () => {
  const s = statsSnapshot(source());
  expect(s.partitions["0"]).toEqual({ consumed: 10, durable_clickhouse: 6, durable_dlq: 1, in_flight: 3, committed_offset: 7, high_watermark: 12, lag: 5, lag_seconds: null });
  expect([s.delivery, s.replays_skipped, s.replay_checks_pending]).toEqual(["exactly-once", 4, 1]);
  expect(s.last_audit).toEqual({ at: "2025-11-24T16:00:00.000Z", seconds: 1.2, result: "failed", findings: { missing: 0, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 } });
});
