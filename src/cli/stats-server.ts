/**
 * The stats server of `cdr-worker run`: /internal/stats, /metrics, /healthz and /readyz from the
 * pipeline's memory, plus the two things readiness needs that nothing else measures: a periodic
 * ClickHouse ping and the event-loop lag.
 */
import type { AuditSchedule } from "../audit/schedule.ts";
import type { LagTime } from "../stats/lag-time.ts";
import type { Config } from "../config.ts";
import { createStatsApp } from "../stats/app.ts";
import { bounded } from "../stats/bounded.ts";
import { partitionLag } from "../stats/lag.ts";
import { LoopLagMonitor } from "../stats/loop-lag.ts";
import { memoryBoundBytes } from "../stats/memory-bound.ts";
import { readiness } from "../stats/readiness.ts";
import { VERSION } from "../version.ts";
import type { Pipeline } from "./pipeline.ts";

const CH_PING_INTERVAL_MS = 5000;
/** Largest request body the stats server reads; its routes are GETs. */
const STATS_MAX_BODY_BYTES = 16 * 1024;
/** Seconds a stats connection may stay idle (or trickle a request) before it is closed. */
const STATS_IDLE_SECONDS = 10;
/** Requests served at once, and the longest one may take (stats/bounded.ts). */
const STATS_MAX_IN_FLIGHT = 32;
const STATS_REQUEST_TIMEOUT_MS = 2_000;

export interface StatsServer {
  url: string;
  stop(): void;
}

/** What the stats serve beside the pipeline: the scheduled audit, lag in time, the raw topic's retention. */
export interface StatsExtras {
  audits?: AuditSchedule | null;
  lagTime?: LagTime | null;
  rawRetentionMs?: number | null;
  rawPartitions?: number;
}

export async function serveStats(cfg: Config, p: Pipeline, extras: StatsExtras = {}): Promise<StatsServer> {
  const { audits = null, lagTime = null, rawRetentionMs = null, rawPartitions } = extras;
  const { counters, consumer, worker, writer, phone, delivery } = p;
  const topic = cfg.kafka.topicRaw;
  const loopLag = new LoopLagMonitor();
  const startedAt = Date.now();
  // Reachability is each endpoint's `up`, which pings and inserts both set: an insert that succeeds
  // after an outage makes the worker ready at once, not at the next ping.
  await writer.ping();
  const pinger = setInterval(() => void writer.ping(), CH_PING_INTERVAL_MS);
  /** Known lag of the owned partitions (stats/lag.ts). */
  const ownedLag = () => {
    let lag = 0;
    const positions = delivery.positions();
    for (const { partition } of consumer.assignment) {
      const high = consumer.watermarks(topic, partition)?.high ?? null;
      const committed = positions.get(partition)?.committed ?? -1;
      lag += partitionLag(high, committed) ?? 0;
    }
    return lag;
  };
  const app = createStatsApp({
    counters,
    version: VERSION,
    workerInstance: cfg.workerInstance,
    topic,
    state: () => worker.state,
    bufferedRows: () => delivery.bufferedRows,
    positions: () => delivery.positions(),
    assignment: () => consumer.assignment.map((a) => a.partition),
    clickhouseEndpoints: () => writer.endpoints,
    highWatermark: (partition) => consumer.watermarks(topic, partition)?.high ?? null,
    phoneCache: () => ({ hits: phone.hits, misses: phone.misses, size: phone.size }),
    breakerRatio: () => delivery.breakerRatio,
    resetBreaker: () => delivery.resetBreaker(),
    eventLoopLagMs: () => loopLag.worstMs,
    memoryBoundBytes: memoryBoundBytes(cfg.batch, cfg.phone.cacheSize),
    delivery: cfg.delivery,
    replayChecksPending: () => delivery.replayChecksPending,
    pausedBy: (partition) => delivery.pausedBy(partition),
    fetchState: (partition) => consumer.fetchState(partition),
    audit: () => audits,
    lagSeconds: lagTime ? (partition, committed, high) => lagTime.seconds(partition, committed, high) : undefined,
    rawRetentionSeconds: rawRetentionMs === null ? undefined : rawRetentionMs / 1000,
    rawPartitions,
    ready: () =>
      readiness({
        assigned: worker.assigned,
        clickhouse: writer.health,
        state: worker.state,
        waiting: counters.inFlight + ownedLag(),
        lastProgressAt: counters.lastCommitAt ?? startedAt,
        now: Date.now(),
      }),
  });
  // Bounded: the routes take no body (a larger one is refused with 413 before it is read), and a
  // connection idle or trickling for STATS_IDLE_SECONDS is closed. Requests are served on the
  // event loop between polls and never wait on Kafka or ClickHouse (test/e2e/stats-server.test.ts).
  const server = Bun.serve({
    hostname: cfg.stats.host,
    port: cfg.stats.port,
    fetch: bounded(app.fetch, { maxInFlight: STATS_MAX_IN_FLIGHT, timeoutMs: STATS_REQUEST_TIMEOUT_MS }),
    maxRequestBodySize: STATS_MAX_BODY_BYTES,
    idleTimeout: STATS_IDLE_SECONDS,
  });
  return {
    url: `http://${server.hostname}:${server.port}/internal/stats`,
    stop: () => {
      clearInterval(pinger);
      loopLag.stop();
      server.stop(true);
    },
  };
}
