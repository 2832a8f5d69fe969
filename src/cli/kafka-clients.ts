/**
 * Every Kafka client the commands make, with the properties each sets over the operator's
 * (kafkaProps: KAFKA_BROKERS and KAFKA_PROP_*, which win unless config.ts refuses them). One list,
 * so the commands build their clients from it and docs/configuration.md's table is written from it
 * (scripts/docs/configuration.ts): the group and client names an ACL must allow are the ones used.
 */
import { kafkaProps, type Config } from "../config.ts";
import { usesConsumerProtocol } from "../kafka/group-session.ts";
import { transactionalId } from "../kafka/transaction.ts";
import { DLQ_MAX_MESSAGE_BYTES } from "../topics/topology.ts";

/** The most a record batch decompresses to, and a fetch response's size (16 MiB and librdkafka's 512). */
export const RECEIVE_MAX_BYTES = 16 * 1024 * 1024 + 512;

/** transaction.timeout.ms unless KAFKA_PROP_TRANSACTION_TIMEOUT_MS says otherwise. */
export const TRANSACTION_TIMEOUT_MS = 10_000;

/**
 * The consumer's statistics.interval.ms under exactly-once: the membership lease hears of each
 * heartbeat's answer within one interval (heartbeat-proof.ts), so this bounds how late a renewal,
 * or a refusal, reaches it; a sample costs a JSON document of the consumer's brokers and
 * partitions, parsed on the event loop.
 */
export const STATISTICS_INTERVAL_MS = 230;

/**
 * The consumer's heartbeat.interval.ms under exactly-once on the classic protocol, unless set. The
 * lease runs from the last accepted heartbeat's sending, so the shorter this, the less of the lease
 * a renewal leaves unused, and the sooner a joining worker's partitions are proven after an
 * assignment handed over late. A heartbeat is one small request to the coordinator.
 */
export const HEARTBEAT_INTERVAL_MS = 500;

/** The group of `dlq fill`: the DLQ topic's partitions are shared among its members. */
export const dlqFillerGroup = (cfg: Config) => `${cfg.kafka.groupId}-dlq-table`;

export interface KafkaClient {
  /** Which librdkafka client type, and so which class defaults apply (consumer.ts, producer.ts). */
  type: "consumer" | "producer" | "admin";
  /** The command that makes it, and when. */
  made: string;
  /** What the client sets; `unique` tells apart the clients of concurrent runs. */
  sets: (cfg: Config, unique: string) => Record<string, string>;
}

export const KAFKA_CLIENTS = {
  consumer: {
    type: "consumer",
    made: "`run`: the worker's consumer of the raw topic",
    sets: (cfg) => ({
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
      // A record batch decompresses to at most this (the lz4 cap of scripts/librdkafka/patches/, as
      // librdkafka caps zstd): a batch that would expand past it, such as a few hundred KiB that
      // decompress to 200 MB, is dead-lettered record by record instead of held in memory. A fetch
      // response is bounded by it too, so fetch.max.bytes stays below it.
      "receive.message.max.bytes": String(RECEIVE_MAX_BYTES),
      "fetch.max.bytes": String(RECEIVE_MAX_BYTES - 512),
      // The membership lease reads the heartbeats' answers from the statistics
      // (kafka/heartbeat-proof.ts): each heard within one of these.
      ...(cfg.delivery === "exactly-once" ? { "statistics.interval.ms": String(STATISTICS_INTERVAL_MS) } : {}),
      // A worker that has just joined inserts once its first heartbeat is proven: with a heartbeat
      // every 0.5 s (librdkafka's 3 s unless set), within about 1 s. Under group.protocol=consumer
      // the broker sets the interval, and librdkafka refuses the property.
      ...(cfg.delivery === "exactly-once" && !usesConsumerProtocol(cfg.kafka.props)
        ? { "heartbeat.interval.ms": String(HEARTBEAT_INTERVAL_MS) }
        : {}),
    }),
  },
  dlqProducer: {
    type: "producer",
    made: "`run`: the DLQ producer",
    sets: (cfg) => ({
      "client.id": `${cfg.workerInstance}-dlq`,
      // An envelope up to the DLQ topic's limit, plus the headers and the record batch's framing.
      "message.max.bytes": String(DLQ_MAX_MESSAGE_BYTES + 65536),
      ...(cfg.delivery === "exactly-once"
        ? {
            "transactional.id": transactionalId(cfg.kafka.groupId, cfg.workerInstance),
            // A dead owner's open transaction holds its successor's read of the committed offsets
            // (a stable read) until the coordinator times it out: this long at most.
            "transaction.timeout.ms": String(TRANSACTION_TIMEOUT_MS),
          }
        : {}),
    }),
  },
  replayCheckReader: {
    type: "consumer",
    made: "`run`, at each assignment: the replay check's reader of the DLQ",
    sets: (cfg) => ({
      "group.id": `${cfg.kafka.groupId}-replay-check`,
      "client.id": `${cfg.workerInstance}-replay-check`,
      // The read ends at each partition's end, whatever its last offsets hold (dlq/reader.ts).
      "enable.partition.eof": "true",
    }),
  },
  dlqFiller: {
    type: "consumer",
    made: "`dlq fill`: reads the committed DLQ into the DLQ table; `audit` reads its group's commits",
    sets: (cfg) => ({
      "group.id": dlqFillerGroup(cfg),
      "client.id": `${cfg.workerInstance}-dlq-fill`,
      // Only what the worker committed: an aborted transaction's envelopes never become rows.
      "isolation.level": "read_committed",
      // Envelopes are up to 8 MiB: the prefetch is bounded in bytes, not the 64 MiB a partition.
      "queued.max.messages.kbytes": "32768",
      // A batch decompresses to at most this, as the worker's consumer: a bomb written to the DLQ
      // topic is refused by the fetcher instead of held in memory (an envelope is at most 8 MiB).
      "receive.message.max.bytes": String(RECEIVE_MAX_BYTES),
      "fetch.max.bytes": String(RECEIVE_MAX_BYTES - 512),
      // The membership lease reads the heartbeats' answers from the statistics.
      "statistics.interval.ms": String(STATISTICS_INTERVAL_MS),
      ...(!usesConsumerProtocol(cfg.kafka.props) ? { "heartbeat.interval.ms": String(HEARTBEAT_INTERVAL_MS) } : {}),
    }),
  },
  dlqFillerCheck: {
    type: "consumer",
    made: "`dlq fill`, at each assignment: reads the record at the DLQ table's position (the table is this topic's)",
    sets: (cfg) => ({
      "group.id": `${dlqFillerGroup(cfg)}-check`,
      "client.id": `${cfg.workerInstance}-dlq-fill-check`,
      "isolation.level": "read_committed",
      "enable.partition.eof": "true",
      "queued.max.messages.kbytes": "16384",
      "receive.message.max.bytes": String(RECEIVE_MAX_BYTES),
      "fetch.max.bytes": String(RECEIVE_MAX_BYTES - 512),
    }),
  },
  lagTimeReader: {
    type: "consumer",
    made: "`run`, every `LAG_TIME_INTERVAL_SECONDS`: reads the time of each partition's oldest uncommitted record",
    sets: (cfg) => ({
      "group.id": `${cfg.kafka.groupId}-lag-time`,
      "client.id": `${cfg.workerInstance}-lag-time`,
      // A partition that has no record past the committed offset answers with its end.
      "enable.partition.eof": "true",
      // It wants one record a partition: a small prefetch, not librdkafka's 64 MiB a partition.
      "queued.max.messages.kbytes": "1024",
    }),
  },
  auditReader: {
    type: "consumer",
    made: "`audit`: its readers of the raw topic and of the DLQ; `trace`: its reader of one offset",
    sets: (_cfg, unique) => ({
      "group.id": `cdr-worker-audit-${unique}`,
      "isolation.level": "read_committed",
      // Reads end at each partition's end as the fetcher reports it, never after a quiet spell.
      "enable.partition.eof": "true",
      // A full prefetch queue makes librdkafka wait this long before it fetches again (1 s unless
      // set): a reader faster than one fetch a second waited on it two thirds of the time
      // (scripts/bench/audit.ts, 10^6 records: 53-58k records/s; 217-230k with 10 ms).
      "fetch.queue.backoff.ms": "10",
    }),
  },
  auditGroup: {
    type: "consumer",
    made: "`audit`, `trace`: read the group's committed offsets (they join nothing)",
    sets: (cfg) => ({ "group.id": cfg.kafka.groupId }),
  },
  auditPosition: {
    type: "consumer",
    made: "`audit --resume`: reads and commits where the next run goes on from (it joins nothing)",
    sets: (cfg) => ({ "group.id": `${cfg.kafka.groupId}-audit` }),
  },
  dlqReader: {
    type: "consumer",
    made: "`dlq inspect`, `dlq replay`: the DLQ's reader",
    sets: (_cfg, unique) => ({ "group.id": `cdr-worker-dlq-reader-${unique}`, "enable.partition.eof": "true" }),
  },
  replayProducer: {
    type: "producer",
    made: "`dlq replay`: sends payloads back to the raw topic",
    sets: () => ({}),
  },
  generator: {
    type: "producer",
    made: "`generate`",
    sets: () => ({ "linger.ms": "20", "batch.num.messages": "10000", "compression.type": "lz4" }),
  },
  admin: {
    type: "admin",
    made: "every command: metadata, offsets, topics, configs",
    sets: () => ({}),
  },
} as const satisfies Record<string, KafkaClient>;

/** The properties a command gives the client: the operator's over what the client sets. */
export function clientProps(
  cfg: Config,
  client: keyof typeof KAFKA_CLIENTS,
  unique = `${process.pid}-${Date.now()}`,
): Record<string, string> {
  return kafkaProps(cfg, KAFKA_CLIENTS[client].sets(cfg, unique));
}
