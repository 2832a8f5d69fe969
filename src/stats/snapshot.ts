/** The JSON of GET /internal/stats, computed from the counters without touching Kafka or ClickHouse. */
import { inFlightOf, type Counters } from "./counters.ts";
import { partitionLag } from "./lag.ts";

export interface StatsSource {
  counters: Counters;
  version: string;
  workerInstance: string;
  topic: string;
  state: () => string;
  bufferedRows: () => number;
  positions: () => Map<number, { committed: number; consumed: number }>;
  /** Partitions of the raw topic this worker owns now. */
  assignment: () => number[];
  /** Cached high watermark of a partition (no network call), or null. */
  highWatermark: (partition: number) => number | null;
  /** Each ClickHouse endpoint (CLICKHOUSE_URL) and what the writer saw of it. */
  clickhouseEndpoints?: () => ReadonlyArray<{
    name: string;
    up: boolean;
    inserts: number;
    failures: number;
    version: string | null;
    /** The endpoint's last refusal of the worker, until it takes an insert again. */
    refusing?: { code: number | null; type: string | null } | null;
  }>;
  phoneCache: () => { hits: number; misses: number; size: number };
  breakerRatio: () => number;
  /** The operator's word to a tripped breaker: true when it was tripped and is reset. */
  resetBreaker?: () => boolean;
  /** Worst event-loop lag of the last ~10 s, ms. */
  eventLoopLagMs: () => number;
  ready: () => { ready: boolean; reasons: string[] };
  /** The RSS this worker's settings size it for (memory-bound.ts). */
  memoryBoundBytes?: number;
  /** DELIVERY: "exactly-once" or "at-least-once". */
  delivery?: string;
  /** Partitions paused until their replay check answers. */
  replayChecksPending?: () => number;
  /** Seconds a partition's oldest uncommitted record has waited (stats/lag-time.ts); null: unknown. */
  lagSeconds?: (partition: number, committed: number, high: number | null) => number | null;
  /** The raw topic's retention.ms, in seconds, when known. */
  rawRetentionSeconds?: number;
  /** The raw topic's partition count, read at start. */
  rawPartitions?: number;
  /** Why the worker holds a partition paused now (delivery/gate.ts): none while it may fetch. */
  pausedBy?: (partition: number) => string[];
  /** Where librdkafka's fetcher stands for a partition (kafka/fetch-state.ts), null without its statistics. */
  fetchState?: (partition: number) => { state: string; nextOffset: number; queued: number } | null;
  /** The scheduled audit, when AUDIT_INTERVAL_SECONDS runs it. */
  audit?: () => AuditStanding | null;
}

/** What the scheduled audit (audit/schedule.ts) has found: its last run and the count of each result. */
export interface AuditStanding {
  last: { at: number; seconds: number; result: AuditVerdict; findings: Record<string, number> | null } | null;
  runs: Record<AuditVerdict, number>;
}
type AuditVerdict = "clean" | "failed" | "error";

const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());
const roundedSeconds = (v: number | null) => (v === null ? null : Math.round(v * 10) / 10);

/** A partition known only from the positions or the assignment: nothing counted yet. */
const NOTHING_COUNTED = {
  consumed: 0, durableClickhouse: 0, durableDlq: 0, expired: 0, passedOver: 0, skipped: 0, repeated: 0,
};

export function statsSnapshot(s: StatsSource) {
  const c = s.counters;
  const positions = s.positions();
  const partitions: Record<string, unknown> = {};
  // Owned partitions that have given nothing yet too: one that fetches nothing must show.
  const ids = new Set<number>([...c.partitions.keys(), ...positions.keys(), ...s.assignment()]);
  for (const p of [...ids].sort((a, b) => a - b)) {
    // Read without creating: a partition known only from positions has counted nothing yet.
    const pc = c.partitions.get(p) ?? NOTHING_COUNTED;
    const pos = positions.get(p);
    const high = s.highWatermark(p);
    const fetch = s.fetchState?.(p) ?? null;
    const committed = pos && pos.committed >= 0 ? pos.committed : null;
    partitions[String(p)] = {
      consumed: pc.consumed,
      durable_clickhouse: pc.durableClickhouse,
      durable_dlq: pc.durableDlq,
      in_flight: inFlightOf(pc),
      expired: pc.expired,
      passed_over: pc.passedOver,
      skipped: pc.skipped,
      repeated: pc.repeated,
      committed_offset: committed,
      high_watermark: high,
      lag: partitionLag(high, committed),
      lag_seconds: committed === null ? null : roundedSeconds(s.lagSeconds?.(p, committed, high) ?? null),
      paused_by: s.pausedBy?.(p) ?? [],
      fetch_state: fetch?.state ?? null,
      fetch_next_offset: fetch?.nextOffset ?? null,
      fetch_queued: fetch?.queued ?? null,
    };
  }
  const phone = s.phoneCache();
  const lookups = phone.hits + phone.misses;
  return {
    worker_instance: s.workerInstance,
    version: s.version,
    state: s.state(),
    uptime_seconds: Math.round((Date.now() - c.startedAt) / 1000),
    topic: s.topic,
    total_processed: c.totalProcessed,
    total_dlq: c.durableDlq,
    total_clickhouse: c.durableClickhouse,
    total_consumed: c.consumed,
    in_flight_buffer: c.inFlight,
    buffered_rows: s.bufferedRows(),
    last_flush_at: iso(c.lastFlushAt),
    last_flush_duration_ms: Math.round(c.lastFlushMs * 10) / 10,
    flush_count: c.flushes,
    clickhouse_endpoints: (s.clickhouseEndpoints?.() ?? []).map((e) => ({
      endpoint: e.name,
      up: e.up,
      version: e.version,
      inserts: e.inserts,
      failures: e.failures,
      refusing: e.refusing?.code ?? null,
    })),
    clickhouse_retries: c.chRetries,
    clickhouse_answers_lost: c.chAnswersLost,
    clickhouse_exhausted_batches: c.chExhausted,
    clickhouse_refused_rows: c.chRefusedRows,
    clickhouse_split_inserts: c.chSplitInserts,
    commits: c.commits,
    records_expired: c.recordsExpired,
    offsets_passed_over: c.offsetsPassedOver,
    offsets_skipped: c.offsetsSkipped,
    records_repeated: c.recordsRepeated,
    commits_refused: c.commitsRefused,
    dlq_producer_renewals: c.dlqProducerRenewals,
    assignments_lost: c.assignmentsLost,
    lost_rows_dropped: c.lostRowsDropped,
    loop_stalls: c.loopStalls,
    last_commit_at: iso(c.lastCommitAt),
    delivery: s.delivery ?? "at-least-once",
    replays_skipped: c.replaysSkipped,
    replay_checks: c.replayChecks,
    replay_check_failures: c.replayCheckFailures,
    replay_checks_pending: s.replayChecksPending?.() ?? 0,
    replay_envelopes_unproven: c.replayEnvelopesUnproven,
    replay_envelopes_mismatched: c.replayEnvelopesMismatched,
    last_audit: lastAudit(s),
    by_service_type: Object.fromEntries(c.byService),
    by_rat: { ...c.byRat },
    by_dlq_reason: { ...c.byDlqReason },
    phone_cache: {
      hits: phone.hits,
      misses: phone.misses,
      size: phone.size,
      hit_rate: lookups ? Math.round((phone.hits / lookups) * 1000) / 1000 : null,
    },
    dlq_ratio_window: Math.round(s.breakerRatio() * 1000) / 1000,
    event_loop_lag_ms: Math.round(s.eventLoopLagMs() * 10) / 10,
    assigned_partitions: [...s.assignment()].sort((a, b) => a - b),
    raw_retention_seconds: s.rawRetentionSeconds ?? null,
    partitions,
    ready: s.ready(),
  };
}

function lastAudit(s: StatsSource) {
  const last = s.audit?.()?.last;
  if (!last) return null;
  const seconds = Math.round(last.seconds * 10) / 10;
  return { at: iso(last.at), seconds, result: last.result, findings: last.findings };
}
