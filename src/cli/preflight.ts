/**
 * What `run` checks before it consumes anything, and `check` reports without consuming: the topics
 * and the group's session on the Kafka side, the table, its schema and the grants on ClickHouse's.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { checkGrants } from "../clickhouse/grants.ts";
import { checkSchema } from "../clickhouse/migrate.ts";
import { renewCredentials } from "../clickhouse/credentials.ts";
import { kafkaProps, type Config } from "../config.ts";
import { clientProps } from "./kafka-clients.ts";
import { CdrWorkerError, KafkaError } from "../errors.ts";
import { Admin } from "../kafka/admin.ts";
import { groupSessionTerms, usesConsumerProtocol, type SessionTerms } from "../kafka/group-session.ts";
import { diagnoseBrokerTls } from "../kafka/tls-diagnosis.ts";
import { log } from "../log.ts";
import { RAW_TOPIC_CODEC, requireTopics } from "../topics/topology.ts";

/**
 * A start-up failure to reach Kafka over TLS, with the reason the broker's certificate was refused
 * (librdkafka says only "certificate verify failed"): expired, another host's, another CA's.
 */
async function withTlsCause(e: unknown, cfg: Config): Promise<unknown> {
  const props = kafkaProps(cfg);
  if (!(e instanceof KafkaError) || !/ssl/i.test(props["security.protocol"] ?? "")) return e;
  const cause = await diagnoseBrokerTls(cfg.kafka.brokers, props["ssl.ca.location"]);
  if (!cause) return e;
  return new KafkaError("KAFKA_CLIENT", `cannot reach Kafka: ${cause}`, e.kafkaCode, e.kafkaName, false, { cause: e });
}

export interface KafkaSide {
  /** Under exactly-once with group.protocol=consumer: the session the coordinator keeps. */
  session: SessionTerms | undefined;
  /** The raw topic's retention.ms (null: unlimited, or not readable: no DescribeConfigs on it). */
  rawRetentionMs: number | null;
  /** The raw topic's partitions at start: what the group's workers should own between them. */
  rawPartitions: number;
  /** The raw topic's cleanup.policy where it compacts, else null: `check` refuses it, `run` says it. */
  rawCompacted: string | null;
}

/** Throws TOPOLOGY when a topic is missing (the operator runs `topics ensure`). */
export async function kafkaPreflight(cfg: Config): Promise<KafkaSide> {
  const admin = new Admin(clientProps(cfg, "admin"));
  try {
    const counts = requireTopics(admin, [cfg.kafka.topicRaw, cfg.kafka.topicDlq]);
    // The lease (exactly-once) is measured against the session the coordinator keeps.
    const session =
      cfg.delivery === "exactly-once" && usesConsumerProtocol(kafkaProps(cfg))
        ? await groupSessionTerms(admin, cfg.kafka.groupId)
        : undefined;
    const rawPartitions = counts.get(cfg.kafka.topicRaw)!;
    const { retentionMs, compacted } = await rawTopicConfigs(admin, cfg.kafka.topicRaw);
    return { session, rawRetentionMs: retentionMs, rawPartitions, rawCompacted: compacted };
  } catch (e) {
    throw await withTlsCause(e, cfg);
  } finally {
    admin.close();
  }
}

/**
 * How long the broker keeps a topic's records, which lag in time is compared with, and whether it
 * compacts them. The worker needs no DescribeConfigs on the topic for anything else: without it,
 * both are unknown and said once. Its compression.type is said too when it is not the spec's lz4:
 * on `producer` (a topic another tool made) records keep whatever codec their producer chose. The
 * worker's memory bound holds either way (librdkafka caps every codec's output:
 * scripts/librdkafka/patches/), but an operator should know why the topic differs from what
 * `topics ensure` makes. A compacted raw topic loses records the worker never fetched, and leaves
 * holes librdkafka skips: each is counted, read again and dead-lettered offset by offset
 * (delivery/offsets/gaps.ts); run says it at start and check refuses it.
 */
async function rawTopicConfigs(
  admin: Admin,
  topic: string,
): Promise<{ retentionMs: number | null; compacted: string | null }> {
  let configs: Awaited<ReturnType<Admin["describeConfigs"]>>;
  try {
    configs = await admin.describeConfigs(topic);
  } catch (e) {
    log.warn("the raw topic's retention.ms could not be read: lag in time is not compared with it", {
      topic,
      err: e as Error,
    });
    return { retentionMs: null, compacted: null };
  }
  const codec = configs["compression.type"]?.value;
  if (codec !== undefined && codec !== null && codec !== RAW_TOPIC_CODEC)
    log.warn("the raw topic's compression.type is not lz4: its records keep their producers' codecs", {
      topic,
      compression_type: codec,
    });
  const policy = configs["cleanup.policy"]?.value ?? "";
  const compacted = policy.split(",").some((p) => p.trim() === "compact") ? policy : null;
  const ms = Number(configs["retention.ms"]?.value);
  return { retentionMs: Number.isFinite(ms) && ms > 0 ? ms : null, compacted };
}

/** What a compacted raw topic does, and the fix, in one line. */
export function compactedRawTopic(topic: string, policy: string): string {
  return (
    `the raw topic ${topic} has cleanup.policy=${policy}: compaction deletes records before they are fetched, ` +
    "and each offset it leaves empty is dead-lettered as skipped; set cleanup.policy=delete"
  );
}

/** One endpoint's table, schema and grants, as the worker's user; throws what `run` would stop on. */
export async function clickhousePreflight(cfg: Config, ch: ClickHouseClient): Promise<void> {
  const { database, table, user } = cfg.clickhouse;
  await checkSchema(ch, database, table);
  await checkGrants(ch, user, database, table);
}

/**
 * Passes when one of the checks passes, as inserts fail over (writer.ts): a refusal that belongs to
 * one endpoint (authentication, a grant, a table or columns missing there) moves on to the next.
 * When none passes, the refusal an operator must fix is thrown before an unreachable one.
 */
export async function onAny(checks: ReadonlyArray<() => Promise<void>>): Promise<void> {
  const failures: CdrWorkerError[] = [];
  for (const check of checks) {
    try {
      return await check();
    } catch (e) {
      if (!(e instanceof CdrWorkerError)) throw e;
      failures.push(e);
    }
  }
  throw decisive(failures);
}

/** Longest pause between two start-up checks that wait (CH_UNREACHABLE_POLICY=wait). */
export const START_CHECK_MAX_DELAY_MS = 30_000;

/**
 * Runs `check` until it passes, 1 s doubling to START_CHECK_MAX_DELAY_MS between tries, with one
 * line a try naming what failed: under CH_UNREACHABLE_POLICY=wait, ClickHouse that refuses the
 * worker at start (its password, grants, table, schema) is waited for, as it is while running.
 * A refusal of the credentials has each endpoint's password file read again (credentials.ts).
 */
export async function untilPasses(
  check: () => Promise<void>,
  endpoints: ReadonlyArray<{ client: ClickHouseClient }>,
  sleep: (ms: number) => Promise<void> = Bun.sleep,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await check();
    } catch (e) {
      if (!(e instanceof CdrWorkerError)) throw e;
      const delay = Math.min(START_CHECK_MAX_DELAY_MS, 1000 * 2 ** (attempt - 1));
      log.warn("ClickHouse does not pass the start-up check; waiting (CH_UNREACHABLE_POLICY=wait)", {
        attempt,
        delay_ms: delay,
        err: e,
      });
      for (const { client } of endpoints) renewCredentials(client);
      await sleep(delay);
    }
  }
}

/** Of the failures of every endpoint, the one `run` stops on. */
export function decisive<E extends { retryable: boolean }>(failures: readonly E[]): E {
  return failures.find((e) => !e.retryable) ?? failures[0]!;
}
