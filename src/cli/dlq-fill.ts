/**
 * `cdr-worker dlq fill`: runs the DLQ table's filler (dlq-table/filler.ts) until SIGTERM/SIGINT.
 * Refuses to start without the DLQ topic or the table (run `topics ensure`, `migrate`).
 */
import { checkGrants } from "../clickhouse/grants.ts";
import { createClickHouse } from "../clickhouse/client.ts";
import { checkDlqSchema, dlqTable } from "../clickhouse/migrate.ts";
import type { Config } from "../config.ts";
import { provenanceKeyOf } from "./provenance-key.ts";
import { fillerMetricsText } from "../dlq-table/filler-metrics.ts";
import { DlqFiller } from "../dlq-table/filler.ts";
import { ClickHouseDlqStore } from "../dlq-table/store.ts";
import { CdrWorkerError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import {
  groupSessionTerms,
  memberSessionTerms,
  usesConsumerProtocol,
  type SessionTerms,
} from "../kafka/group-session.ts";
import { log } from "../log.ts";
import { clientProps, dlqFillerGroup } from "./kafka-clients.ts";
import { onShutdownSignals } from "./signals.ts";

export const DLQ_FILL_HELP = `cdr-worker dlq fill
  Fills the DLQ table (<table>_dlq, made by migrate) from KAFKA_TOPIC_DLQ as the worker commits it
  (read_committed), each record exactly once, and runs until SIGTERM/SIGINT. Run as many as the
  DLQ topic has partitions: they share them in the group <KAFKA_GROUP_ID>-dlq-table. It never
  dead-letters: while ClickHouse fails it waits and tries again, and catches up after. Serves
  /healthz, /internal/stats (stored, skipped, inserts, lost answers, next offsets) and /metrics on
  STATS_HOST:STATS_PORT.`;

/**
 * Characters of one insert's rows, and of the rows read and not yet stored (past it, consumption
 * pauses): every field counted, each capped (src/dlq-table/row.ts FIELD_CAPS, rowBytes).
 */
const BATCH_BYTES = 16 * 1024 * 1024;
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

export async function dlqFillCommand(cfg: Config): Promise<ExitKind> {
  const { database, table } = cfg.clickhouse;
  const props = clientProps(cfg, "dlqFiller");
  const admin = new Admin(clientProps(cfg, "admin"));
  let partitions: number | null | undefined;
  let terms: SessionTerms;
  try {
    partitions = admin.partitionCounts([cfg.kafka.topicDlq]).get(cfg.kafka.topicDlq);
    // The lease is measured against the session the coordinator keeps: the group's own under
    // group.protocol=consumer (a member cannot set it there), the member's otherwise.
    terms = usesConsumerProtocol(props)
      ? await groupSessionTerms(admin, dlqFillerGroup(cfg))
      : memberSessionTerms(props);
  } finally {
    admin.close();
  }
  if (partitions == null)
    throw new CdrWorkerError("TOPOLOGY", `topic ${cfg.kafka.topicDlq} missing; run \`cdr-worker topics ensure\``);
  const ch = createClickHouse(cfg.clickhouse);
  // Its rows are RowBinary, exact only against the columns of sql/002_dlq.sql: one line a column
  // that differs (or the table missing), before anything is read.
  await checkDlqSchema(ch, database, table);
  // Its own role's grants (grants.ts dlqNeeds): one line naming a missing one, before anything is read.
  await checkGrants(ch, cfg.clickhouse.user, database, table, "dlq");
  const topics = [cfg.kafka.topicDlq];
  // Each message becomes a row at once (filler.ts #take): its bytes are not kept past the next poll.
  const consumer = new Consumer({
    props,
    topics,
    readHeaders: true,
    assignPaused: true,
    maxBatch: 512,
    reuseSlab: true,
  });
  const key = provenanceKeyOf(cfg);
  const filler = new DlqFiller(consumer, new ClickHouseDlqStore(ch, database, table), {
    topic: cfg.kafka.topicDlq,
    // The worker's own batch settings: BATCH_SIZE rows an insert, up to BATCH_BACKLOG_ROWS when more
    // wait, BATCH_FLUSH_INTERVAL_SECONDS at most.
    batchRows: cfg.batch.size,
    backlogRows: cfg.batch.backlogRows,
    batchBytes: BATCH_BYTES,
    flushIntervalMs: cfg.batch.flushIntervalMs,
    maxBufferedBytes: MAX_BUFFERED_BYTES,
    requestTimeoutMs: cfg.clickhouse.requestTimeoutMs,
    drainTimeoutMs: Math.max(1_000, cfg.shutdownTimeoutMs - 2_000),
    lease: {
      sessionTimeoutMs: terms.sessionTimeoutMs,
      rebalanceTimeoutMs: Number(props["max.poll.interval.ms"] ?? 300_000),
    },
    row: { ...(key ? { key } : {}), ...(cfg.phone.defaultRegion ? { defaultRegion: cfg.phone.defaultRegion } : {}) },
    instance: cfg.workerInstance.replace(/[^\w.-]/g, "_"),
    recordAt: (partition, offset) => committedRecordAt(cfg, partition, offset),
  });
  onShutdownSignals(() => filler.stop(), cfg.shutdownTimeoutMs);
  const server = serveFillerStats(cfg, filler);
  log.info("cdr-worker dlq fill running", {
    topic: cfg.kafka.topicDlq,
    partitions,
    table: `${database}.${dlqTable(table)}`,
    group: dlqFillerGroup(cfg),
    // The session the membership lease is measured against, and whose it is (the group's under KIP-848).
    session_timeout_ms: terms.sessionTimeoutMs,
    session_from: terms.source,
    stats: `http://${server.hostname}:${server.port}/internal/stats`,
  });
  try {
    await filler.run();
    log.info("dlq fill stopped cleanly", { ...filler.counts });
    return "OK";
  } catch (e) {
    log.error("dlq fill failed", { err: e as Error });
    return "FAILED";
  } finally {
    void server.stop(true);
    await ch.close();
  }
}

/** Longest wait for the one record the check reads. */
const RECORD_AT_MS = 30_000;

/**
 * The DLQ topic's committed record at `offset` (read_committed, by a consumer of its own): "gone"
 * below the low watermark, null when the topic has no committed record there.
 */
async function committedRecordAt(cfg: Config, partition: number, offset: number): Promise<Message | "gone" | null> {
  const topic = cfg.kafka.topicDlq;
  const c = new Consumer({ props: clientProps(cfg, "dlqFillerCheck"), topics: [], readHeaders: true });
  try {
    const { low, high } = c.queryWatermarks(topic, partition);
    if (offset < low) return "gone";
    if (offset >= high) return null;
    c.assign([{ topic, partition, offset: BigInt(offset) }]);
    const deadline = performance.now() + RECORD_AT_MS;
    while (performance.now() < deadline) {
      for (const m of c.poll(16)) if (m.partition === partition) return m.offset === offset ? m : null;
      // A marker or an aborted record at the offset, and nothing committed after it.
      if ((c.endReached(partition) ?? -1) >= high) return null;
      await c.waitForMessages(50);
    }
    throw new Error(`reading ${topic} partition ${partition} offset ${offset}: no answer in ${RECORD_AT_MS / 1000} s`);
  } finally {
    await c.close();
  }
}

/** A loop that has not passed for this long is stuck: /healthz says so (the kubelet restarts it). */
const STUCK_AFTER_MS = 30_000;

/**
 * The filler's stats on STATS_HOST:STATS_PORT, as the worker's: /healthz (the loop passes),
 * /internal/stats (its counts, positions and rows buffered) and /metrics (filler-metrics.ts).
 */
function serveFillerStats(cfg: Config, filler: DlqFiller) {
  return Bun.serve({
    hostname: cfg.stats.host,
    port: cfg.stats.port,
    idleTimeout: 10,
    maxRequestBodySize: 16 * 1024,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method !== "GET") return new Response("method not allowed\n", { status: 405 });
      if (path === "/healthz") {
        const ok = performance.now() - filler.lastPass < STUCK_AFTER_MS;
        return new Response(ok ? "ok\n" : "the filler's loop has not run for 30 s\n", { status: ok ? 200 : 503 });
      }
      if (path === "/metrics")
        return new Response(fillerMetricsText(filler), { headers: { "content-type": "text/plain; version=0.0.4" } });
      if (path === "/internal/stats")
        return Response.json({
          ...filler.counts,
          buffered_bytes: filler.buffered,
          next_offsets: Object.fromEntries(filler.positions),
        });
      return new Response("not found\n", { status: 404 });
    },
  });
}
