/** `cdr-worker run`: wires Kafka, ClickHouse, the worker and the stats server; handles signals. */
import { PhoneNormalizer } from "../cdr/phone.ts";
import { createClickHouseEndpoints } from "../clickhouse/client.ts";
import { checkSchemaOnAny } from "../clickhouse/migrate.ts";
import { ClickHouseWriter } from "../clickhouse/writer.ts";
import { kafkaProps, type Config } from "../config.ts";
import { DlqPublisher } from "../dlq/publisher.ts";
import { KafkaError } from "../errors.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { Producer } from "../kafka/producer.ts";
import { diagnoseBrokerTls } from "../kafka/tls-diagnosis.ts";
import { log } from "../log.ts";
import { createStatsApp } from "../stats/app.ts";
import { LoopLagMonitor } from "../stats/loop-lag.ts";
import { readiness } from "../stats/readiness.ts";
import { onShutdownSignals } from "./signals.ts";
import { Counters } from "../stats/counters.ts";
import { requireTopics } from "../topics/topology.ts";
import { VERSION } from "../version.ts";
import { Worker } from "../worker.ts";

export const RUN_HELP = `cdr-worker run: consume ${"`cdr.raw`"}, insert valid rows into ClickHouse,
dead-letter the rest. Stops cleanly on SIGTERM/SIGINT (flush, commit, exit 0). A second signal,
or SHUTDOWN_TIMEOUT_SECONDS passing, exits 1 without committing anything that is not durable.`;

const CH_PING_INTERVAL_MS = 5000;

/**
 * A start-up failure to reach Kafka over TLS, with the reason the broker's certificate was refused
 * (librdkafka says only "certificate verify failed"): expired, another host's, another CA's.
 */
async function withTlsCause(e: unknown, cfg: Config): Promise<unknown> {
  const props = kafkaProps(cfg);
  if (!(e instanceof KafkaError) || !/ssl/i.test(props["security.protocol"] ?? "")) return e;
  const cause = await diagnoseBrokerTls(cfg.kafka.brokers, props["ssl.ca.location"]);
  return cause ? new KafkaError("KAFKA_CLIENT", `cannot reach Kafka: ${cause}`, e.kafkaCode, e.kafkaName) : e;
}

/** Largest request body the stats server reads; its routes are GETs. */
const STATS_MAX_BODY_BYTES = 16 * 1024;
/** Seconds a stats connection may stay idle (or trickle a request) before it is closed. */
const STATS_IDLE_SECONDS = 10;

export async function runCommand(cfg: Config): Promise<number> {
  const admin = new Admin(kafkaProps(cfg));
  try {
    requireTopics(admin, [cfg.kafka.topicRaw, cfg.kafka.topicDlq]);
  } catch (e) {
    throw await withTlsCause(e, cfg);
  } finally {
    admin.close();
  }
  const endpoints = createClickHouseEndpoints(cfg.clickhouse);
  await checkSchemaOnAny(
    endpoints.map((e) => e.client),
    cfg.clickhouse.database,
    cfg.clickhouse.table,
  );

  const counters = new Counters();
  const phone = new PhoneNormalizer({ defaultRegion: cfg.phone.defaultRegion, cacheSize: cfg.phone.cacheSize });
  const producer = new Producer(kafkaProps(cfg, { "client.id": `${cfg.workerInstance}-dlq` }));
  const consumer = new Consumer({
    props: kafkaProps(cfg, {
      "group.id": cfg.kafka.groupId,
      "client.id": cfg.workerInstance,
      // Prefetch bound: the librdkafka queue is the one buffer the worker does not size itself.
      // librdkafka stops fetching a partition once its queue is over this and waits
      // fetch.queue.backoff.ms before it looks again; at its default (1 s) a worker-speed consumer
      // waited on an empty queue 85 % of the time with 4 MiB and 45 % with 16 MiB; with 10 ms,
      // never, down to 2 MiB at 250k records/s (scripts/bench/prefetch.ts). 4 MiB (~16k records)
      // leaves room for a broker further away than loopback.
      "queued.max.messages.kbytes": "4096",
      "fetch.queue.backoff.ms": "10",
    }),
    topics: [cfg.kafka.topicRaw],
    maxBatch: cfg.batch.size,
    // For the end-to-end latency histogram (read in the native batch copy: no call per message).
    readTimestamps: true,
  });
  const writer = new ClickHouseWriter(endpoints, cfg.clickhouse.database, cfg.clickhouse.table);
  const dlq = new DlqPublisher(producer, {
    topic: cfg.kafka.topicDlq,
    workerInstance: cfg.workerInstance,
    storageFailureReason: cfg.dlq.storageFailureReason,
  });
  const worker = new Worker(
    {
      topic: cfg.kafka.topicRaw,
      batchSize: cfg.batch.size,
      flushIntervalMs: cfg.batch.flushIntervalMs,
      concurrency: cfg.batch.concurrency,
      retry: cfg.retry,
      dlqMaxRatio: cfg.dlq.maxRatio,
      dlqRatioWindow: cfg.dlq.ratioWindow,
    },
    { consumer, writer, dlq, phone, counters },
  );

  const loopLag = new LoopLagMonitor();
  const startedAt = Date.now();
  let chReachable = await writer.ping();
  const pinger = setInterval(async () => {
    chReachable = await writer.ping();
  }, CH_PING_INTERVAL_MS);
  /** Known lag of the owned partitions: high watermark minus committed, where both are known. */
  const ownedLag = () => {
    let lag = 0;
    const positions = worker.positions();
    for (const p of consumer.assignment) {
      const high = consumer.watermarks(cfg.kafka.topicRaw, p.partition)?.high ?? null;
      const committed = positions.get(p.partition)?.committed ?? -1;
      if (high !== null && committed >= 0) lag += Math.max(0, high - committed);
    }
    return lag;
  };
  const app = createStatsApp({
    counters,
    version: VERSION,
    workerInstance: cfg.workerInstance,
    topic: cfg.kafka.topicRaw,
    state: () => worker.state,
    bufferedRows: () => worker.bufferedRows,
    positions: () => worker.positions(),
    assignment: () => consumer.assignment.map((p) => p.partition),
    clickhouseEndpoints: () => writer.endpoints,
    highWatermark: (p) => consumer.watermarks(cfg.kafka.topicRaw, p)?.high ?? null,
    phoneCache: () => ({ hits: phone.hits, misses: phone.misses, size: phone.size }),
    breakerRatio: () => worker.breakerRatio,
    eventLoopLagMs: () => loopLag.worstMs,
    ready: () =>
      readiness({
        assigned: worker.assigned,
        clickhouseReachable: chReachable,
        clickhouseHealthy: worker.clickhouseHealthy,
        state: worker.state,
        waiting: counters.inFlight + ownedLag(),
        lastProgressAt: counters.lastCommitAt ?? startedAt,
        now: Date.now(),
      }),
  });
  // Handlers before the "running" line: a supervisor that signals as soon as it reads it must get a
  // graceful stop, not the default action (seen: exit 143 in the image test).
  onShutdownSignals(() => worker.stop(), cfg.shutdownTimeoutMs);
  // Bounded: the routes take no body (a larger one is refused with 413 before it is read), and a
  // connection idle or trickling for STATS_IDLE_SECONDS is closed. Requests are served on the
  // event loop between polls and never wait on Kafka or ClickHouse (test/e2e/stats-server.test.ts).
  const server = Bun.serve({
    hostname: cfg.stats.host,
    port: cfg.stats.port,
    fetch: app.fetch,
    maxRequestBodySize: STATS_MAX_BODY_BYTES,
    idleTimeout: STATS_IDLE_SECONDS,
  });
  log.info("cdr-worker running", {
    version: VERSION,
    worker_instance: cfg.workerInstance,
    topic: cfg.kafka.topicRaw,
    stats: `http://${server.hostname}:${server.port}/internal/stats`,
  });

  try {
    await worker.run();
    await producer.flush(5000).catch(() => {});
    log.info("stopped cleanly", { total_processed: counters.totalProcessed, total_dlq: counters.durableDlq });
    return 0;
  } catch (e) {
    log.error("worker failed", { err: e as Error });
    return 1;
  } finally {
    clearInterval(pinger);
    loopLag.stop();
    server.stop(true);
    producer.close();
    await Promise.all(endpoints.map((e) => e.client.close()));
  }
}
