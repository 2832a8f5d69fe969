/** The parts of `cdr-worker run`, made from the configuration: Kafka clients, ClickHouse, the worker. */
import { PhoneNormalizer } from "../cdr/phone.ts";
import type { createClickHouseEndpoints } from "../clickhouse/client.ts";
import { ClickHouseWriter } from "../clickhouse/writer.ts";
import type { Config } from "../config.ts";
import { CdrWorkerError } from "../errors.ts";
import { deadLetteredOffsets } from "../dlq/delivered.ts";
import type { ProvenanceKey } from "../dlq/provenance-mac.ts";
import { provenanceKeyOf } from "./provenance-key.ts";
import { MAX_PAYLOAD_CHARS } from "../dlq/envelope.ts";
import { DlqPublisher } from "../dlq/publisher.ts";
import { offsetLookup, type OffsetLookup } from "../kafka/offset-lookup.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { reportsPassedOver } from "../kafka/native.ts";
import { findDelivered, type Owned } from "../delivery/offsets/replay-check.ts";
import { Producer } from "../kafka/producer.ts";
import { Transactions, type GroupMetadata } from "../kafka/transaction.ts";
import { TransactionalCommits } from "../delivery/offsets/transactional-commits.ts";
import { Counters } from "../stats/counters.ts";
import { Delivery } from "../delivery/delivery.ts";
import type { CommitMarks } from "../delivery/replays.ts";
import { Worker } from "../worker/worker.ts";
import { log } from "../log.ts";
import { memberSessionTerms, type SessionTerms } from "../kafka/group-session.ts";
import { clientProps, TRANSACTION_TIMEOUT_MS } from "./kafka-clients.ts";

export interface Pipeline {
  counters: Counters;
  phone: PhoneNormalizer;
  /** The DLQ's producer now (exactly-once makes it again after a timed-out transaction). */
  dlqProducer: () => Producer;
  /** Exactly-once: the DLQ's envelopes and the group's commits in one transaction; init() before running. */
  transactions: TransactionalCommits<GroupMetadata> | null;
  consumer: Consumer;
  writer: ClickHouseWriter;
  delivery: Delivery;
  worker: Worker;
}

/**
 * `session`: the group's session as the coordinator keeps it (kafka/group-session.ts), read at start
 * under group.protocol=consumer; the consumer's own properties give it otherwise.
 */
export function buildPipeline(
  cfg: Config,
  endpoints: ReturnType<typeof createClickHouseEndpoints>,
  session?: SessionTerms,
): Pipeline {
  const counters = new Counters();
  const phone = new PhoneNormalizer({ defaultRegion: cfg.phone.defaultRegion, cacheSize: cfg.phone.cacheSize });
  const exactlyOnce = cfg.delivery === "exactly-once";
  const dlqProps = clientProps(cfg, "dlqProducer");
  // Exactly-once makes the producer again when the coordinator times a transaction out (it is
  // fenced for good then): the one to flush and close at the end is whichever is current.
  let producer = new Producer(dlqProps);
  const consumerProps = clientProps(cfg, "consumer");
  const terms = session ?? memberSessionTerms(consumerProps);
  const consumer = new Consumer({
    props: consumerProps,
    topics: [cfg.kafka.topicRaw],
    maxBatch: cfg.batch.size,
    // For the end-to-end latency histogram (read in the native batch copy: no call per message).
    readTimestamps: true,
    // Delivery resumes each once it may deliver it (after its replay check, under exactly-once).
    assignPaused: true,
    // A record over RECORD_MAX_BYTES is dead-lettered with its first bytes only: no more is copied
    // out of librdkafka, and no key, which the worker does not read.
    valueMaxBytes: Math.max(cfg.recordMaxBytes, MAX_PAYLOAD_CHARS),
    readKeys: false,
    // Every offset accounted for: what librdkafka passes over on purpose is said (delivery/offsets/gaps.ts).
    passedOver: true,
  });
  const transactions = exactlyOnce
    ? new TransactionalCommits(new Transactions(producer), {
        group: () => consumer.groupMetadata(),
        owns: (partition) => consumer.assignment.some((a) => a.partition === partition),
        topic: cfg.kafka.topicRaw,
        timeoutMs: Number(dlqProps["transaction.timeout.ms"] ?? TRANSACTION_TIMEOUT_MS),
        ...(dlqProps["message.timeout.ms"] ? { deliveryTimeoutMs: Number(dlqProps["message.timeout.ms"]) } : {}),
        renew: () => {
          counters.dlqProducerRenewals++;
          producer = new Producer(dlqProps);
          return new Transactions(producer);
        },
        committed: (partitions) => committedOffsets(cfg, consumer, partitions),
      })
    : null;
  const writer = new ClickHouseWriter(endpoints, cfg.clickhouse.database, cfg.clickhouse.table, {
    instance: cfg.workerInstance,
    user: cfg.clickhouse.user,
    syncDistributed: exactlyOnce,
    requestTimeoutMs: cfg.clickhouse.requestTimeoutMs,
    waitOnRefusal: cfg.retry.whenUnreachable === "wait",
  });
  // One key signs what this worker dead-letters and proves what its replay check reads.
  const key = provenanceKeyOf(cfg);
  const dlq = new DlqPublisher(transactions ?? producer, {
    topic: cfg.kafka.topicDlq,
    workerInstance: cfg.workerInstance,
    storageFailureReason: cfg.dlq.storageFailureReason,
    ...(key ? { key } : {}),
  });
  const delivery = new Delivery(
    {
      topic: cfg.kafka.topicRaw,
      batchSize: cfg.batch.size,
      batchBacklogRows: cfg.batch.backlogRows,
      batchMaxBytes: cfg.batch.maxBytes,
      flushIntervalMs: cfg.batch.flushIntervalMs,
      concurrency: cfg.batch.concurrency,
      retry: cfg.retry,
      dlqMaxRatio: cfg.dlq.maxRatio,
      dlqRatioWindow: cfg.dlq.ratioWindow,
      // A freeze, a stuck revocation and the membership lease are judged by the session.
      sessionTimeoutMs: terms.sessionTimeoutMs,
      maxPollIntervalMs: Number(consumerProps["max.poll.interval.ms"] ?? 300_000),
    },
    {
      consumer,
      writer,
      dlq,
      counters,
      offsets: gapReads(cfg, consumer, exactlyOnce),
      ...(transactions
        ? { replays: replayCheck(cfg, consumer, writer, counters, key), transactions }
        : {}),
    },
  );
  const worker = new Worker({ consumer, decoding: { phone, recordMaxBytes: cfg.recordMaxBytes }, delivery });
  return { counters, phone, dlqProducer: () => producer, transactions, consumer, writer, delivery, worker };
}

/** The replay check's parts: the group's commits, ClickHouse's provenance columns, the DLQ's headers. */
function replayCheck(
  cfg: Config,
  consumer: Consumer,
  writer: ClickHouseWriter,
  counters: Counters,
  key: ProvenanceKey | undefined,
) {
  const topic = cfg.kafka.topicRaw;
  return {
    // A client of its own for each check (checks are rare). Its requests are answered on a queue
    // polled without blocking, so the event loop serves /healthz and the partitions meanwhile,
    // however slowly the broker answers.
    findDelivered: async (partitions: number[], commitMarks: CommitMarks) => {
      const admin = new Admin(clientProps(cfg, "admin"));
      const lookup = offsetLookup(admin, consumer);
      try {
        return await findDelivered(partitions, {
          topic,
          committed: (tps) => lookup.committed(cfg.kafka.groupId, tps),
          commit: commitMarks,
          lowWatermarks: (ps) => lookup.listOffsets(topic, ps, "earliest"),
          highWatermarks: (ps) => lookup.listOffsets(topic, ps, "latest"),
          insertsEnded: () => writer.insertsEnded(),
          stored: (owned) => writer.storedOffsets(owned),
          anyStored: (ranges) => writer.anyStored(ranges),
          deadLettered: (owned) => dlqOffsets(cfg, lookup, owned, counters, key),
        });
      } finally {
        admin.close();
      }
    },
  };
}

/** How long the client that reads log starts for gaps is kept after its last read. */
const GAP_CLIENT_IDLE_MS = 30_000;

/**
 * What delivery/offsets/gaps.ts reads: the raw topic's log starts, through one client kept while
 * gaps come (a transactional producer leaves one a transaction, read at most once a second) and
 * closed once none came for GAP_CLIENT_IDLE_MS; and, at-least-once, where an assignment starts.
 */
function gapReads(cfg: Config, consumer: Consumer, exactlyOnce: boolean) {
  const topic = cfg.kafka.topicRaw;
  let admin: Admin | null = null;
  let idle: ReturnType<typeof setTimeout> | undefined;
  const lookup = () => {
    clearTimeout(idle);
    admin ??= new Admin(clientProps(cfg, "admin"));
    const a = admin;
    idle = setTimeout(() => {
      if (admin === a) admin = null;
      a.close();
    }, GAP_CLIENT_IDLE_MS);
    idle.unref();
    return offsetLookup(a, consumer);
  };
  return {
    logStarts: (partitions: readonly number[]) => lookup().listOffsets(topic, partitions, "earliest"),
    skipsTold: reportsPassedOver(),
    ...(exactlyOnce
      ? {}
      : {
          committed: async (partitions: readonly number[]) => {
            const tps = await committedOffsets(cfg, consumer, partitions);
            return new Map(tps.map((c) => [c.partition, c.err ? -1 : Number(c.offset ?? -1n)]));
          },
        }),
  };
}

/** The group's committed offsets of the raw topic, read stable, by a client made for the read. */
async function committedOffsets(cfg: Config, consumer: Consumer, partitions: readonly number[]) {
  const admin = new Admin(clientProps(cfg, "admin"));
  try {
    const tps = partitions.map((partition) => ({ topic: cfg.kafka.topicRaw, partition }));
    return await offsetLookup(admin, consumer).committed(cfg.kafka.groupId, tps);
  } finally {
    admin.close();
  }
}

/** Reads the DLQ with a consumer of its own, made for the check and closed after it. */
async function dlqOffsets(
  cfg: Config,
  lookup: OffsetLookup,
  owned: readonly Owned[],
  counters: Counters,
  key: ProvenanceKey | undefined,
) {
  const partitions = await lookup.partitionCount(cfg.kafka.topicDlq);
  if (partitions === null) throw new CdrWorkerError("TOPOLOGY", `topic ${cfg.kafka.topicDlq} missing`);
  const reader = new Consumer({
    props: clientProps(cfg, "replayCheckReader"),
    topics: [],
    readHeaders: true,
  });
  try {
    const { topicDlq, topicRaw } = cfg.kafka;
    return await deadLetteredOffsets(reader, lookup, topicDlq, partitions, topicRaw, owned, key, (n) => {
      counters.replayEnvelopesUnproven += n;
      log.warn("DLQ envelopes without a valid MAC were not taken as delivered", { envelopes: n });
    });
  } finally {
    await reader.close();
  }
}
