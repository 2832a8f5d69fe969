/** Prometheus text exposition (format 0.0.4) of the same counters. */
import { inFlightOf } from "./counters.ts";
import { Exposition } from "./exposition.ts";
import type { StatsSource } from "./snapshot.ts";
import { partitionLag } from "./lag.ts";

type Section = (s: StatsSource, c: StatsSource["counters"], x: Exposition) => void;

export function metricsText(s: StatsSource): string {
  const x = new Exposition();
  for (const section of SECTIONS) section(s, s.counters, x);
  return x.lines.join("\n") + "\n";
}

/** What happened to the records: per partition, by DLQ reason, by RAT and service. */
const records: Section = (s, c, { metric }) => {
  const parts = [...c.partitions.entries()].sort((a, b) => a[0] - b[0]);
  metric(
    "cdr_worker_records_consumed_total",
    "counter",
    "Records handed to the worker by Kafka.",
    parts.map(([p, v]) => [{ partition: p }, v.consumed]),
  );
  metric(
    "cdr_worker_records_clickhouse_total",
    "counter",
    "Records durable in ClickHouse.",
    parts.map(([p, v]) => [{ partition: p }, v.durableClickhouse]),
  );
  metric(
    "cdr_worker_records_dlq_total",
    "counter",
    "Records acknowledged by the DLQ topic.",
    parts.map(([p, v]) => [{ partition: p }, v.durableDlq]),
  );
  metric(
    "cdr_worker_records_expired_total",
    "counter",
    "Records the broker deleted (retention, DeleteRecords) before this worker fetched them: lost to it.",
    parts.map(([p, v]) => [{ partition: p }, v.expired]),
  );
  metric(
    "cdr_worker_offsets_passed_over_total",
    "counter",
    "Offsets librdkafka passed over: transaction markers and aborted transactions' records.",
    parts.map(([p, v]) => [{ partition: p }, v.passedOver]),
  );
  metric(
    "cdr_worker_offsets_skipped_total",
    "counter",
    "Offsets never handed over, neither deleted by the broker nor passed over on purpose: read again, " +
      "dead-lettered if still missing.",
    parts.map(([p, v]) => [{ partition: p }, v.skipped]),
  );
  metric(
    "cdr_worker_records_repeated_total",
    "counter",
    "Records librdkafka handed out again under the same assignment: dropped, their first copy stored or on its way.",
    parts.map(([p, v]) => [{ partition: p }, v.repeated]),
  );
  metric(
    "cdr_worker_records_in_flight",
    "gauge",
    "Records consumed and not yet durable.",
    parts.map(([p, v]) => [{ partition: p }, inFlightOf(v)]),
  );
  metric(
    "cdr_worker_dlq_records_total",
    "counter",
    "DLQ records by failure_reason.",
    Object.entries(c.byDlqReason).map(([r, n]) => [{ reason: r }, n]),
  );
  metric(
    "cdr_worker_rows_by_rat_total",
    "counter",
    "Rows inserted by radio access type.",
    Object.entries(c.byRat).map(([r, n]) => [{ rat: r }, n]),
  );
  metric(
    "cdr_worker_rows_by_service_total",
    "counter",
    "Rows inserted by service type.",
    [...c.byService].map(([svc, n]) => [{ service_type: svc }, n]),
  );
};

/** Inserts: buffered rows, flushes, retries, each endpoint, refused rows. */
const clickhouse: Section = (s, c, { metric }) => {
  metric("cdr_worker_buffered_rows", "gauge", "Rows in memory (the filling batch and the sealed ones).", [
    [{}, s.bufferedRows()],
  ]);
  metric("cdr_worker_flushes_total", "counter", "Successful ClickHouse inserts.", [[{}, c.flushes]]);
  metric("cdr_worker_clickhouse_retries_total", "counter", "Insert attempts that failed and were retried.", [
    [{}, c.chRetries],
  ]);
  metric(
    "cdr_worker_clickhouse_answers_lost_total",
    "counter",
    "Inserts that failed after they may have been stored; checked before their rows were sent again.",
    [[{}, c.chAnswersLost]],
  );
  const endpoints = s.clickhouseEndpoints?.() ?? [];
  metric(
    "cdr_worker_clickhouse_endpoint_up",
    "gauge",
    "1 when the ClickHouse endpoint took the last insert or ping sent to it.",
    endpoints.map((e) => [{ endpoint: e.name }, e.up ? 1 : 0]),
  );
  metric(
    "cdr_worker_clickhouse_endpoint_refusing",
    "gauge",
    "1 while the ClickHouse endpoint refuses the worker itself (label code: its credentials, grants, table, a " +
      "read-only user), until it takes an insert again; 0 without a code otherwise.",
    endpoints.map((e) => [{ endpoint: e.name, code: e.refusing?.code ?? "" }, e.refusing ? 1 : 0]),
  );
  metric(
    "cdr_worker_clickhouse_endpoint_info",
    "gauge",
    "1 for each ClickHouse endpoint whose version the worker learned (label version, from SELECT version()).",
    endpoints.filter((e) => e.version !== null).map((e) => [{ endpoint: e.name, version: e.version! }, 1]),
  );
  metric(
    "cdr_worker_clickhouse_endpoint_inserts_total",
    "counter",
    "Inserts the ClickHouse endpoint acknowledged.",
    endpoints.map((e) => [{ endpoint: e.name }, e.inserts]),
  );
  metric(
    "cdr_worker_clickhouse_endpoint_failures_total",
    "counter",
    "Inserts the endpoint could not take (no answer, or a refusal of its own such as authentication or a " +
      "missing table), then sent to the next one.",
    endpoints.map((e) => [{ endpoint: e.name }, e.failures]),
  );
  metric(
    "cdr_worker_clickhouse_exhausted_batches_total",
    "counter",
    "Batches routed to the DLQ after all insert attempts failed.",
    [[{}, c.chExhausted]],
  );
  metric(
    "cdr_worker_clickhouse_refused_rows_total",
    "counter",
    "Rows ClickHouse refused alone, each sent to the DLQ by itself; the rest of their batch was inserted.",
    [[{}, c.chRefusedRows]],
  );
  metric(
    "cdr_worker_clickhouse_split_inserts_total",
    "counter",
    "Inserts made while isolating refused rows or splitting a batch refused whole.",
    [[{}, c.chSplitInserts]],
  );
};

/** Commits and the owned partitions' positions, high watermarks and lag. */
const offsets: Section = (s, c, { metric }) => {
  metric("cdr_worker_commits_total", "counter", "Successful offset commits.", [[{}, c.commits]]);
  metric(
    "cdr_worker_commits_refused_total",
    "counter",
    "Commits refused while the group rebalanced or its coordinator was not ready; sent again if still owned.",
    [[{}, c.commitsRefused]],
  );
  metric(
    "cdr_worker_dlq_producer_renewals_total",
    "counter",
    "DLQ producers made again after the coordinator timed a transaction out while Kafka was unreachable.",
    [[{}, c.dlqProducerRenewals]],
  );
  metric(
    "cdr_worker_assignments_lost_total",
    "counter",
    "Assignments the group took away before the worker released them; their held rows were dropped, not flushed.",
    [[{}, c.assignmentsLost]],
  );
  metric(
    "cdr_worker_lost_rows_dropped_total",
    "counter",
    "Rows held for lost partitions and dropped unsent: their next owner replays them.",
    [[{}, c.lostRowsDropped]],
  );
  metric(
    "cdr_worker_loop_stalls_total",
    "counter",
    "Times the worker did not run for over half its session (a freeze); sends waited for the group's verdict.",
    [[{}, c.loopStalls]],
  );
  metric(
    "cdr_worker_exactly_once",
    "gauge",
    "1 when DELIVERY=exactly-once: a partition's next owner skips what its last owner delivered; 0 at-least-once.",
    [[{}, s.delivery === "exactly-once" ? 1 : 0]],
  );
  metric(
    "cdr_worker_replays_skipped_total",
    "counter",
    "Records skipped because the partition's last owner had stored or dead-lettered them past its commit.",
    [[{}, c.replaysSkipped]],
  );
  metric(
    "cdr_worker_replay_check_failures_total",
    "counter",
    "Replay checks that failed (ClickHouse or Kafka not answering); each is tried again, its partitions paused.",
    [[{}, c.replayCheckFailures]],
  );
  metric(
    "cdr_worker_replay_envelopes_refused_total",
    "counter",
    "DLQ envelopes the replay check did not take as delivered: without a valid MAC (DLQ_PROVENANCE_KEY set), " +
      "or proven for another payload than the record at their offset.",
    [
      [{ why: "unproven" }, c.replayEnvelopesUnproven],
      [{ why: "mismatched" }, c.replayEnvelopesMismatched],
    ],
  );
  metric("cdr_worker_replay_checks_pending", "gauge", "Partitions paused until their replay check answers.", [
    [{}, s.replayChecksPending?.() ?? 0],
  ]);
  const positions = s.positions();
  const committed = [...positions].filter(([, v]) => v.committed >= 0).sort((a, b) => a[0] - b[0]);
  metric(
    "cdr_worker_committed_offset",
    "gauge",
    "Last committed offset per partition.",
    committed.map(([p, v]) => [{ partition: p }, v.committed]),
  );
  const highs = committed
    .map(([p, v]) => [p, v.committed, s.highWatermark(p)] as const)
    .filter((x): x is readonly [number, number, number] => x[2] !== null);
  metric(
    "cdr_worker_partition_high_watermark",
    "gauge",
    "Last known high watermark per assigned partition (librdkafka's cached value, no broker call).",
    highs.map(([p, , h]) => [{ partition: p }, h]),
  );
  metric(
    "cdr_worker_partition_lag",
    "gauge",
    "Records of a partition not yet committed: high watermark minus committed offset.",
    highs.map(([p, c, h]) => [{ partition: p }, partitionLag(h, c)!]),
  );
  const ages = highs
    .map(([p, c, h]) => [p, s.lagSeconds?.(p, c, h) ?? null] as const)
    .filter((x): x is readonly [number, number] => x[1] !== null);
  if (s.lagSeconds)
    metric(
      "cdr_worker_partition_lag_seconds",
      "gauge",
      "How long the oldest uncommitted record of a partition has waited, from its Kafka timestamp (0: no lag).",
      ages.map(([p, a]) => [{ partition: p }, a]),
    );
  if (s.rawRetentionSeconds !== undefined)
    metric("cdr_worker_raw_retention_seconds", "gauge", "The raw topic's retention.ms, in seconds, read at start.", [
      [{}, s.rawRetentionSeconds],
    ]);
  metric("cdr_worker_assigned_partitions", "gauge", "Partitions of the raw topic this worker owns.", [
    [{}, s.assignment().length],
  ]);
  // Beside the group's sum of assigned partitions: a partition no worker owns pages (CdrWorkerPartitionsUnowned).
  if (s.rawPartitions !== undefined)
    metric("cdr_worker_raw_topic_partitions", "gauge", "The raw topic's partition count, read at start.", [
      [{}, s.rawPartitions],
    ]);
};

/** The process: phone cache, event loop, readiness, breaker, memory, uptime. */
const runtime: Section = (s, c, { metric }) => {
  const phone = s.phoneCache();
  metric("cdr_worker_phone_cache_hits_total", "counter", "Phone verdicts served from cache.", [[{}, phone.hits]]);
  metric("cdr_worker_phone_cache_misses_total", "counter", "Phone verdicts computed.", [[{}, phone.misses]]);
  metric("cdr_worker_event_loop_lag_seconds", "gauge", "Worst event-loop lag over the last ~10 s.", [
    [{}, s.eventLoopLagMs() / 1000],
  ]);
  metric("cdr_worker_ready", "gauge", "1 when /readyz answers 200.", [[{}, s.ready().ready ? 1 : 0]]);
  metric("cdr_worker_dlq_breaker_tripped", "gauge", "1 when the DLQ circuit breaker stopped consumption.", [
    [{}, s.state() === "tripped" ? 1 : 0],
  ]);
  metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [[{}, process.memoryUsage.rss()]]);
  if (s.memoryBoundBytes !== undefined)
    metric("cdr_worker_memory_bound_bytes", "gauge", "The RSS the worker's settings size it for.", [
      [{}, s.memoryBoundBytes],
    ]);
  metric("cdr_worker_uptime_seconds", "gauge", "Seconds since start.", [[{}, (Date.now() - c.startedAt) / 1000]]);
};

/** Insert time, batch size and produce-to-insert latency. */
const histograms: Section = (s, c, { histogram }) => {
  histogram(
    "cdr_worker_flush_duration_seconds",
    "Time from sealing a batch to its acknowledged insert, retries included.",
    c.flushSeconds,
  );
  histogram("cdr_worker_batch_rows", "Rows per inserted batch.", c.batchRows);
  histogram(
    "cdr_worker_end_to_end_latency_seconds",
    "Time from a record's Kafka timestamp to the acknowledgement of its ClickHouse insert.",
    c.endToEndSeconds,
  );
};

/** The scheduled audit (AUDIT_INTERVAL_SECONDS), when it runs: its runs and its last findings. */
const audit: Section = (s, _c, { metric }) => {
  const a = s.audit?.();
  if (!a) return;
  metric(
    "cdr_worker_audit_runs_total",
    "counter",
    "Scheduled audits by result: clean, failed (findings), error (it could not run).",
    (["clean", "failed", "error"] as const).map((r) => [{ result: r }, a.runs[r]]),
  );
  if (!a.last) return;
  metric("cdr_worker_audit_last_run_timestamp_seconds", "gauge", "When the last scheduled audit ended.", [
    [{}, a.last.at / 1000],
  ]);
  if (a.last.findings)
    metric(
      "cdr_worker_audit_findings",
      "gauge",
      "Offsets the last scheduled audit found missing, stored twice, dead-lettered twice, both, or not a record.",
      Object.entries(a.last.findings).map(([finding, n]) => [{ finding }, n]),
    );
};

const SECTIONS: Section[] = [records, clickhouse, offsets, runtime, audit, histograms];
