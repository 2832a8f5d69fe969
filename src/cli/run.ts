/**
 * `cdr-worker run`: checks that the topics and the table are there, builds the pipeline, serves
 * its stats, runs it until a signal or a fatal error, and closes what it opened.
 */
import { AuditSchedule } from "../audit/schedule.ts";
import { createClickHouseEndpoints } from "../clickhouse/client.ts";
import { keyRequired, shutdownBelowBudget, type Config } from "../config.ts";
import { ConfigError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { log } from "../log.ts";
import { commit, VERSION } from "../version.ts";
import { Consumer } from "../kafka/consumer.ts";
import { Admin } from "../kafka/admin.ts";
import type { SessionTerms } from "../kafka/group-session.ts";
import { SessionWatch } from "../kafka/session-watch.ts";
import { RecordTimes } from "../kafka/record-times.ts";
import { LagTime } from "../stats/lag-time.ts";
import { clientProps } from "./kafka-clients.ts";
import { buildPipeline, type Pipeline } from "./pipeline.ts";
import { clickhousePreflight, compactedRawTopic, kafkaPreflight, onAny, untilPasses } from "./preflight.ts";
import { onShutdownSignals } from "./signals.ts";
import { serveStats } from "./stats-server.ts";

export const RUN_HELP = `cdr-worker run: consume ${"`cdr.raw`"}, insert valid rows into ClickHouse,
dead-letter the rest. Stops cleanly on SIGTERM/SIGINT (flush, commit, exit 0). A second signal,
or SHUTDOWN_TIMEOUT_SECONDS passing, exits 1 without committing anything that is not durable.`;

/**
 * Refuses to start without the topics, the table or a grant the worker needs (the operator runs
 * `topics ensure` / `migrate`, or grants what the line names). One ClickHouse endpoint that passes
 * is enough: the others are retried as the writer meets them.
 */
async function preflight(cfg: Config) {
  const { session, rawRetentionMs, rawPartitions, rawCompacted } = await kafkaPreflight(cfg);
  // Said where the cause can still be seen; check refuses it (a deploy step), run goes on.
  const topic = cfg.kafka.topicRaw;
  if (rawCompacted) log.error(compactedRawTopic(topic, rawCompacted), { topic, cleanup_policy: rawCompacted });
  if (session)
    log.info("the group's session, as the broker keeps it (group.protocol=consumer)", {
      session_timeout_ms: session.sessionTimeoutMs,
      heartbeat_interval_ms: session.heartbeatIntervalMs,
    });
  const endpoints = createClickHouseEndpoints(cfg.clickhouse);
  const check = () => onAny(endpoints.map((e) => () => clickhousePreflight(cfg, e.client)));
  // Under the wait policy a refusal at start (a password rotated, a table detached) is waited out
  // as one met while running is: a worker started during an operator's change starts after it.
  if (cfg.retry.whenUnreachable === "wait") await untilPasses(check, endpoints);
  else await check();
  return { endpoints, session, rawRetentionMs, rawPartitions };
}

/** Lag in time (stats/lag-time.ts), read with a consumer of its own at the committed offsets. */
function lagTimeOf(cfg: Config, { consumer, delivery }: Pipeline) {
  const topic = cfg.kafka.topicRaw;
  const reader = new Consumer({ props: clientProps(cfg, "lagTimeReader"), topics: [] });
  const times = new RecordTimes(reader);
  const clock = new LagTime(
    {
      owned: () => {
        const positions = delivery.positions();
        return consumer.assignment.map(({ partition }) => ({
          partition,
          committed: positions.get(partition)?.committed ?? -1,
          high: consumer.watermarks(topic, partition)?.high ?? null,
        }));
      },
      timesAt: (offsets) => times.at(topic, offsets),
    },
    cfg.lagTimeIntervalMs,
  );
  return {
    clock,
    close: async () => {
      await clock.stop();
      await reader.close();
    },
  };
}

/** Under KIP-848 the group's session is the broker's, and may change while the worker runs. */
function watchSession(cfg: Config, session: SessionTerms, pipeline: Pipeline) {
  const admin = new Admin(clientProps(cfg, "admin"));
  const follow = (t: SessionTerms) => pipeline.delivery.sessionChanged(t.sessionTimeoutMs);
  const watch = new SessionWatch(admin, cfg.kafka.groupId, session, follow);
  return {
    stop: () => {
      watch.stop();
      admin.close();
    },
  };
}

export async function runCommand(cfg: Config): Promise<ExitKind> {
  const unkeyed = keyRequired(cfg);
  if (unkeyed) throw new ConfigError([unkeyed]);
  const { endpoints, session, rawRetentionMs, rawPartitions } = await preflight(cfg);
  const pipeline = buildPipeline(cfg, endpoints, session);
  const sessionWatch = session ? watchSession(cfg, session, pipeline) : null;
  const { worker, dlqProducer, counters } = pipeline;
  // The owner of partition 0 audits for the group (audit/schedule.ts).
  const ownsPartitionZero = () => pipeline.consumer.assignment.some((a) => a.partition === 0);
  const audits = cfg.auditIntervalMs > 0 ? new AuditSchedule(cfg.auditIntervalMs, { due: ownsPartitionZero }) : null;
  const lagTime = cfg.lagTimeIntervalMs > 0 ? lagTimeOf(cfg, pipeline) : null;
  const stats = await serveStats(cfg, pipeline, { audits, lagTime: lagTime?.clock, rawRetentionMs, rawPartitions });
  // Handlers before the "running" line: a supervisor that signals as soon as it reads it must get a
  // graceful stop, not the default action (seen: exit 143 in the image test).
  onShutdownSignals(() => worker.stop(), cfg.shutdownTimeoutMs);
  if (cfg.delivery === "exactly-once" && !cfg.dlq.provenanceKey)
    log.warn("DLQ_PROVENANCE=unsigned: the replay check and the audit take any DLQ envelope's source headers as " +
      "true, so whoever may write to the DLQ topic can make them count records as delivered (docs/security.md)");
  const short = shutdownBelowBudget(cfg);
  if (short) log.warn(`SHUTDOWN_TIMEOUT_SECONDS=${short.value}, ${short.expected}`);
  log.info("cdr-worker running", {
    version: VERSION,
    commit: commit(),
    worker_instance: cfg.workerInstance,
    topic: cfg.kafka.topicRaw,
    stats: stats.url,
  });
  try {
    await pipeline.transactions?.init();
    await worker.run();
    await dlqProducer().flush(5000).catch(() => {});
    log.info("stopped cleanly", { total_processed: counters.totalProcessed, total_dlq: counters.durableDlq });
    return "OK";
  } catch (e) {
    log.error("worker failed", { err: e as Error });
    return "FAILED";
  } finally {
    sessionWatch?.stop();
    audits?.stop();
    await lagTime?.close();
    stats.stop();
    dlqProducer().close();
    await Promise.all(endpoints.map((e) => e.client.close()));
  }
}
