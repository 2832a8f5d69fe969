// The stats answer from a StatsSource, without services: the per-partition identity, lag, the
// delivery mode and the scheduled audit's last result.
import { expect, setDefaultTimeout, test } from "bun:test";
import { statsSnapshot } from "../../src/stats/snapshot.ts";
import { statsSource as source } from "../support/stats-source.ts";

setDefaultTimeout(60_000);

test("per partition: consumed = durable + in flight, lag from the high watermark and the commit", () => {
  const s = statsSnapshot(source());
  expect(s.partitions["0"]).toEqual({ consumed: 10, durable_clickhouse: 6, durable_dlq: 1, in_flight: 3, expired: 0, passed_over: 0, skipped: 0, repeated: 0, committed_offset: 7, high_watermark: 12, lag: 5, lag_seconds: null, paused_by: [], fetch_state: null, fetch_next_offset: null, fetch_queued: null });
  expect([s.delivery, s.replays_skipped, s.replay_checks_pending]).toEqual(["exactly-once", 4, 1]);
  expect(s.last_audit).toEqual({ at: "2025-11-24T16:00:00.000Z", seconds: 1.2, result: "failed", findings: { missing: 0, stored_twice: 1, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 } });
});

test("an owned partition that has given nothing yet is listed, with what holds it and where librdkafka's fetcher stands", () => {
  const s = statsSnapshot({
    ...source(),
    assignment: () => [0, 2],
    highWatermark: (p) => (p === 2 ? null : 12),
    pausedBy: (p) => (p === 2 ? ["replay-check"] : []),
    fetchState: (p) => (p === 2 ? { state: "offset-query", nextOffset: -2, queued: 0 } : null),
  });
  expect(Object.keys(s.partitions)).toEqual(["0", "2"]);
  expect(s.partitions["2"]).toEqual({
    consumed: 0, durable_clickhouse: 0, durable_dlq: 0, in_flight: 0, expired: 0, passed_over: 0, skipped: 0, repeated: 0, committed_offset: null, high_watermark: null, lag: null,
    lag_seconds: null, paused_by: ["replay-check"], fetch_state: "offset-query", fetch_next_offset: -2, fetch_queued: 0,
  });
  expect(s.partitions["0"]).toMatchObject({ paused_by: [], fetch_state: null });
});
