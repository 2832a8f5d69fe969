/**
 * Topic administration (create, delete, describe and alter configs, partition counts) and the
 * replay check's offset lookups (a group's commits, offsets by position or time).
 * Admin results come back on a private queue polled without blocking; metadata is a bounded
 * blocking call, used by commands, at start-up, and by the check on a library older than 2.3.
 */
import { CString, ptr, read, type Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import {
  closedError,
  ErrorText,
  createHandle,
  destroyHandle,
  errName,
  isTransient,
  kafkaError,
  pollQueue,
  takeError,
  type Handle,
  type KafkaProps,
} from "./handle.ts";
import { cstr, rdk, rdkLookups } from "./native.ts";
import { fromNativeList, toNativeList, type TopicPartition } from "./partition-list.ts";
import { METADATA, METADATA_PARTITION, METADATA_TOPIC, RD, TOPIC_PARTITION } from "./structs.ts";

export interface TopicSpec {
  name: string;
  partitions: number;
  replicationFactor: number;
  configs: Record<string, string>;
}

export interface ConfigValue {
  value: string | null;
  isDefault: boolean;
  /** True for an override set on the topic itself (CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG). */
  isTopicOverride: boolean;
}

/** Per-topic outcome of a create/delete: err 0 on success. */
export interface TopicResult {
  name: string;
  err: number;
  errName: string;
  message: string;
}

const NONE: ReadonlySet<number> = new Set();
/** The longest a blocking metadata request waits before the error callbacks are served (partitionCounts). */
const METADATA_SLICE_MS = 500;

/**
 * ListOffsets' _NOENT ("Failed to query partition leaders: No leaders found"): the metadata names no
 * leader for a partition. A broker just restarted says so until its partitions have leaders again,
 * so a later attempt gets past it; a topic that is not there says the same, and its callers (the
 * replay check, tried again while it fails) see it in their logs.
 */
const NO_LEADER: ReadonlySet<number> = new Set([-156]);

export class Admin {
  readonly #h: Handle;
  readonly #timeoutMs: number;
  readonly #props: KafkaProps;
  #closed = false;
  /** Requests awaiting their result: close() frees the handle only after the last one. */
  #inFlight = 0;

  constructor(props: KafkaProps, timeoutMs = 15_000) {
    this.#props = props;
    this.#h = createHandle(RD.PRODUCER, props);
    this.#timeoutMs = timeoutMs;
  }

  /**
   * One admin request on a queue of its own, so concurrent calls never take each other's results;
   * the client's own logs and errors, waiting on its main queue, are served after each.
   */
  async #request<T>(
    type: number,
    send: (opts: Pointer, queue: Pointer) => void,
    take: (ev: Pointer) => T,
    what = "admin request failed",
    transient: ReadonlySet<number> = NONE,
  ): Promise<T> {
    if (this.#closed) throw closedError("admin request");
    const lib = rdk();
    const queue = lib.rd_kafka_queue_new(this.#h.rk)!;
    const opts = this.#options();
    this.#inFlight++;
    try {
      send(opts, queue);
      const ev = await this.#awaitEvent(queue, type, what, transient);
      try {
        return take(ev);
      } finally {
        lib.rd_kafka_event_destroy(ev);
      }
    } finally {
      lib.rd_kafka_AdminOptions_destroy(opts);
      lib.rd_kafka_queue_destroy(queue);
      lib.rd_kafka_poll(this.#h.rk, 0);
      if (--this.#inFlight === 0 && this.#closed) destroyHandle(this.#h);
    }
  }

  async createTopics(specs: readonly TopicSpec[]): Promise<TopicResult[]> {
    const lib = rdk();
    const errstr = new ErrorText();
    const handles = specs.map((s) => {
      const t = lib.rd_kafka_NewTopic_new(cstr(s.name), s.partitions, s.replicationFactor, errstr.buf, errstr.size);
      if (!t) throw new KafkaError("KAFKA_ADMIN", `topic ${s.name}: ${errstr.toString()}`);
      for (const [k, v] of Object.entries(s.configs)) lib.rd_kafka_NewTopic_set_config(t, cstr(k), cstr(v));
      return t;
    });
    try {
      const arr = pointerArray(handles);
      return await this.#request(
        RD.EVENT_CREATETOPICS_RESULT,
        (opts, queue) => lib.rd_kafka_CreateTopics(this.#h.rk, arr, handles.length, opts, queue),
        (ev) => topicResults(lib.rd_kafka_event_CreateTopics_result(ev)!, "rd_kafka_CreateTopics_result_topics"),
      );
    } finally {
      for (const t of handles) lib.rd_kafka_NewTopic_destroy(t);
    }
  }

  async deleteTopics(names: readonly string[]): Promise<TopicResult[]> {
    const lib = rdk();
    const handles = names.map((n) => lib.rd_kafka_DeleteTopic_new(cstr(n))!);
    try {
      const arr = pointerArray(handles);
      return await this.#request(
        RD.EVENT_DELETETOPICS_RESULT,
        (opts, queue) => lib.rd_kafka_DeleteTopics(this.#h.rk, arr, handles.length, opts, queue),
        (ev) => topicResults(lib.rd_kafka_event_DeleteTopics_result(ev)!, "rd_kafka_DeleteTopics_result_topics"),
      );
    } finally {
      for (const t of handles) lib.rd_kafka_DeleteTopic_destroy(t);
    }
  }

  /** All configs of a topic as the broker reports them. */
  async describeConfigs(topic: string, kind: "topic" | "group" = "topic"): Promise<Record<string, ConfigValue>> {
    // An empty name would reach librdkafka as a resource without a name (NULL).
    if (!topic) throw new KafkaError("KAFKA_ADMIN", `describe configs: a ${kind} name is required`);
    if (this.#closed) throw closedError(`describe ${topic}`);
    const lib = rdk();
    const type = kind === "group" ? RD.RESOURCE_GROUP : RD.RESOURCE_TOPIC;
    const res = lib.rd_kafka_ConfigResource_new(type, cstr(topic))!;
    const arr = pointerArray([res]);
    try {
      return await this.#request(
        RD.EVENT_DESCRIBECONFIGS_RESULT,
        (opts, queue) => lib.rd_kafka_DescribeConfigs(this.#h.rk, arr, 1, opts, queue),
        (ev) => {
          const result = lib.rd_kafka_event_DescribeConfigs_result(ev)!;
          const [resource] = readPointers((cnt) => lib.rd_kafka_DescribeConfigs_result_resources(result, cnt));
          if (!resource) throw new KafkaError("KAFKA_ADMIN", `describe ${topic}: empty result`);
          throwResourceError(`describe ${topic}`, resource);
          const out: Record<string, ConfigValue> = {};
          for (const entry of readPointers((cnt) => lib.rd_kafka_ConfigResource_configs(resource, cnt))) {
            const v = lib.rd_kafka_ConfigEntry_value(entry);
            out[String(lib.rd_kafka_ConfigEntry_name(entry))] = {
              value: v ? String(new CString(v)) : null,
              isDefault: lib.rd_kafka_ConfigEntry_is_default(entry) === 1,
              isTopicOverride: lib.rd_kafka_ConfigEntry_source(entry) === 1,
            };
          }
          return out;
        },
      );
    } finally {
      lib.rd_kafka_ConfigResource_destroy(res);
    }
  }

  async alterConfigs(topic: string, configs: Record<string, string>): Promise<void> {
    if (!topic) throw new KafkaError("KAFKA_ADMIN", "alter configs: a topic name is required");
    if (this.#closed) throw closedError(`alter ${topic}`);
    const lib = rdk();
    const res = lib.rd_kafka_ConfigResource_new(RD.RESOURCE_TOPIC, cstr(topic))!;
    const arr = pointerArray([res]);
    try {
      for (const [k, v] of Object.entries(configs)) lib.rd_kafka_ConfigResource_set_config(res, cstr(k), cstr(v));
      await this.#request(
        RD.EVENT_ALTERCONFIGS_RESULT,
        (opts, queue) => lib.rd_kafka_AlterConfigs(this.#h.rk, arr, 1, opts, queue),
        (ev) => {
          const result = lib.rd_kafka_event_AlterConfigs_result(ev)!;
          for (const r of readPointers((cnt) => lib.rd_kafka_AlterConfigs_result_resources(result, cnt)))
            throwResourceError(`alter ${topic}`, r);
        },
      );
    } finally {
      lib.rd_kafka_ConfigResource_destroy(res);
    }
  }

  /** Partition count of each named topic; null for a topic the cluster does not have. */
  /**
   * Resolves once every partition of `topics` answers ListOffsets from its leader. A topic the
   * controller has just created is in the metadata before its partitions take records: a produce
   * to it then fails with UNKNOWN_TOPIC_OR_PART, which is fatal for the worker's DLQ producer.
   * Asked by a client of its own, made now: what a worker started next will see, not what this
   * handle learned while creating the topics.
   */
  async awaitServing(topics: ReadonlyArray<{ name: string; partitions: number }>, timeoutMs = 30_000): Promise<void> {
    if (topics.length === 0) return;
    if (this.#closed) throw closedError("await serving topics");
    const lib = rdk();
    const low = new BigInt64Array(1);
    const high = new BigInt64Array(1);
    const deadline = Date.now() + timeoutMs;
    const probe = createHandle(RD.PRODUCER, this.#props);
    try {
      for (const t of topics) {
        for (let p = 0; p < t.partitions; p++) {
          for (;;) {
            const err = lib.rd_kafka_query_watermark_offsets(probe.rk, cstr(t.name), p, low, high, 1000);
            if (err === 0) break;
            if (Date.now() > deadline) throw kafkaError("KAFKA_ADMIN", `${t.name}[${p}] not serving`, err, true);
            await Bun.sleep(100);
          }
        }
      }
    } finally {
      destroyHandle(probe);
    }
  }

  partitionCounts(topics: readonly string[], timeoutMs = 10_000): Map<string, number | null> {
    return new Map([...this.topicShapes(topics, timeoutMs)].map(([t, s]) => [t, s?.partitions ?? null]));
  }

  /**
   * Each topic's partition count and replication factor (the most replicas any partition has), null
   * for a topic that does not exist.
   */
  topicShapes(
    topics: readonly string[],
    timeoutMs = 10_000,
  ): Map<string, { partitions: number; replicas: number } | null> {
    if (this.#closed) throw closedError("metadata");
    const lib = rdk();
    const out = new BigUint64Array(1);
    // Asked in slices, with the error callbacks served between them: brokers that refuse this client
    // (a wrong password, a certificate that fails verification) end the wait at once, not at its end.
    const asked = performance.now();
    const deadline = asked + timeoutMs;
    for (;;) {
      const slice = Math.max(1, Math.min(METADATA_SLICE_MS, Math.round(deadline - performance.now())));
      const err = lib.rd_kafka_metadata(this.#h.rk, 1, null, out, slice);
      if (err === 0) break;
      // The queued log and error callbacks say why (e.g. SASL authentication failed), where the
      // metadata error alone only says "transport failure".
      lib.rd_kafka_poll(this.#h.rk, 0);
      const refused = this.#h.refused;
      // Only a refusal heard during this request: a long-lived client may have been refused before.
      if (refused && refused.at >= asked) {
        throw kafkaError("KAFKA_ADMIN", `metadata: ${refused.reason}`, refused.code, false);
      }
      if (performance.now() >= deadline) throw kafkaError("KAFKA_ADMIN", "metadata", err, true);
    }
    const md = Number(out[0]) as Pointer;
    try {
      const found = new Map<string, { partitions: number; replicas: number } | null>(topics.map((t) => [t, null]));
      const cnt = read.i32(md, METADATA.topic_cnt);
      const arr = read.ptr(md, METADATA.topics) as Pointer;
      for (let i = 0; i < cnt; i++) {
        const base = i * METADATA_TOPIC.size;
        const name = String(new CString(read.ptr(arr, base + METADATA_TOPIC.topic) as Pointer));
        if (!found.has(name) || read.i32(arr, base + METADATA_TOPIC.err) !== 0) continue;
        const partitions = read.i32(arr, base + METADATA_TOPIC.partition_cnt);
        const parts = read.ptr(arr, base + METADATA_TOPIC.partitions) as Pointer;
        let replicas = 0;
        for (let p = 0; p < partitions; p++)
          replicas = Math.max(replicas, read.i32(parts, p * METADATA_PARTITION.size + METADATA_PARTITION.replica_cnt));
        found.set(name, { partitions, replicas });
      }
      return found;
    } finally {
      lib.rd_kafka_metadata_destroy(md);
    }
  }

  /**
   * Each partition's offset at `spec`: its first offset ("earliest"), its end under read_committed
   * ("latest"), or the first offset whose record's timestamp is at or after a time in ms, -1 where
   * none is. Asked without blocking the event loop (ListOffsets), unlike the consumer's own calls.
   */
  async listOffsets(
    topic: string,
    partitions: readonly number[],
    spec: "earliest" | "latest" | number,
  ): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    if (partitions.length === 0) return out;
    if (this.#closed) throw closedError(`list offsets of ${topic}`);
    const lib = rdk();
    const lk = lookups(`list offsets of ${topic}`);
    const at =
      spec === "earliest" ? RD.OFFSET_SPEC_EARLIEST : spec === "latest" ? RD.OFFSET_SPEC_LATEST : Math.floor(spec);
    const list = toNativeList(partitions.map((partition) => ({ topic, partition, offset: BigInt(at) })));
    try {
      return await this.#request(
        RD.EVENT_LISTOFFSETS_RESULT,
        (opts, queue) => {
          const refused = lk.rd_kafka_AdminOptions_set_isolation_level(opts, RD.ISOLATION_LEVEL_READ_COMMITTED);
          throwIf(takeError("KAFKA_ADMIN", "isolation level", refused));
          lk.rd_kafka_ListOffsets(this.#h.rk, list, opts, queue);
        },
        (ev) => {
          const result = lk.rd_kafka_event_ListOffsets_result(ev)!;
          for (const info of readPointers((cnt) => lk.rd_kafka_ListOffsets_result_infos(result, cnt))) {
            const tp = lk.rd_kafka_ListOffsetsResultInfo_topic_partition(info)!;
            const err = read.i32(tp, TOPIC_PARTITION.err);
            const partition = read.i32(tp, TOPIC_PARTITION.partition);
            if (err) throw kafkaError("KAFKA_ADMIN", `list offsets of ${topic}[${partition}]`, err);
            out.set(partition, Number(read.i64(tp, TOPIC_PARTITION.offset)));
          }
          for (const p of partitions)
            if (!out.has(p)) throw new KafkaError("KAFKA_ADMIN", `list offsets of ${topic}: no answer for [${p}]`);
          return out;
        },
        `list offsets of ${topic}`,
        NO_LEADER,
      );
    } finally {
      lib.rd_kafka_topic_partition_list_destroy(list);
    }
  }

  /**
   * A group's committed offsets of these partitions, with each one's metadata and error, as
   * Consumer.committed() reads them (-1001 where none is), without blocking the event loop
   * (ListConsumerGroupOffsets, waiting for transactional commits to settle as committed() does).
   */
  async committed(group: string, partitions: readonly TopicPartition[]): Promise<TopicPartition[]> {
    if (partitions.length === 0) return [];
    if (this.#closed) throw closedError(`committed offsets of ${group}`);
    const lib = rdk();
    const lk = lookups(`committed offsets of ${group}`);
    const list = toNativeList(partitions.map(({ topic, partition }) => ({ topic, partition })));
    const request = lk.rd_kafka_ListConsumerGroupOffsets_new(cstr(group), list)!;
    lib.rd_kafka_topic_partition_list_destroy(list);
    try {
      const arr = pointerArray([request]);
      return await this.#request(
        RD.EVENT_LISTCONSUMERGROUPOFFSETS_RESULT,
        (opts, queue) => {
          const refused = lk.rd_kafka_AdminOptions_set_require_stable_offsets(opts, 1);
          throwIf(takeError("KAFKA_ADMIN", "require stable offsets", refused));
          lk.rd_kafka_ListConsumerGroupOffsets(this.#h.rk, arr, 1, opts, queue);
        },
        (ev) => {
          const result = lk.rd_kafka_event_ListConsumerGroupOffsets_result(ev)!;
          const [g] = readPointers((cnt) => lk.rd_kafka_ListConsumerGroupOffsets_result_groups(result, cnt));
          if (!g) throw new KafkaError("KAFKA_ADMIN", `committed offsets of ${group}: empty result`);
          const error = lk.rd_kafka_group_result_error(g);
          if (error) throw readError(`committed offsets of ${group}`, error);
          return fromNativeList(lk.rd_kafka_group_result_partitions(g));
        },
        `committed offsets of ${group}`,
      );
    } finally {
      lk.rd_kafka_ListConsumerGroupOffsets_destroy(request);
    }
  }

  /** A topic's partition count, null for a topic the cluster does not have; without blocking (DescribeTopics). */
  async partitionCount(topic: string): Promise<number | null> {
    if (this.#closed) throw closedError(`describe ${topic}`);
    const lk = lookups(`describe ${topic}`);
    const name = cstr(topic);
    const names = BigUint64Array.of(BigInt(ptr(name)));
    const collection = lk.rd_kafka_TopicCollection_of_topic_names(names, 1)!;
    try {
      return await this.#request(
        RD.EVENT_DESCRIBETOPICS_RESULT,
        (opts, queue) => lk.rd_kafka_DescribeTopics(this.#h.rk, collection, opts, queue),
        (ev) => {
          const result = lk.rd_kafka_event_DescribeTopics_result(ev)!;
          const [t] = readPointers((cnt) => lk.rd_kafka_DescribeTopics_result_topics(result, cnt));
          if (!t) throw new KafkaError("KAFKA_ADMIN", `describe ${topic}: empty result`);
          const error = lk.rd_kafka_TopicDescription_error(t);
          if (error) {
            const e = readError(`describe ${topic}`, error);
            if (e.kafkaName === "UNKNOWN_TOPIC_OR_PART") return null;
            throw e;
          }
          return readPointers((cnt) => lk.rd_kafka_TopicDescription_partitions(t, cnt)).length;
        },
        `describe ${topic}`,
      );
    } finally {
      lk.rd_kafka_TopicCollection_destroy(collection);
    }
  }

  /**
   * What the broker lets this client do with a topic or a group (DescribeTopics, DescribeGroups with
   * their authorized operations): `check`'s reading of the ACLs `run` needs, without consuming,
   * writing or joining anything. A broker with no authorizer allows everything. Throws the refusal
   * when the client may not even describe it (TOPIC_/GROUP_AUTHORIZATION_FAILED).
   */
  async authorizedOperations(kind: "topic" | "group", name: string): Promise<Set<AclOperation>> {
    if (this.#closed) throw closedError(`describe ${kind} ${name}`);
    const what = `describe ${kind} ${name}`;
    const lk = lookups(what);
    const cname = cstr(name);
    const names = BigUint64Array.of(BigInt(ptr(cname)));
    const operations = (arr: Pointer | null, cnt: BigUint64Array) =>
      new Set(Array.from({ length: Number(cnt[0]) }, (_, i) => ACL_OPERATIONS[read.i32(arr!, i * 4)] ?? "UNKNOWN"));
    const withAuthorized = (opts: Pointer) => {
      const e = lk.rd_kafka_AdminOptions_set_include_authorized_operations(opts, 1);
      if (e) throw readOwnedError(what, e);
    };
    if (kind === "topic") {
      const collection = lk.rd_kafka_TopicCollection_of_topic_names(names, 1)!;
      try {
        return await this.#request(
          RD.EVENT_DESCRIBETOPICS_RESULT,
          (opts, queue) => {
            withAuthorized(opts);
            lk.rd_kafka_DescribeTopics(this.#h.rk, collection, opts, queue);
          },
          (ev) => {
            const result = lk.rd_kafka_event_DescribeTopics_result(ev)!;
            const [t] = readPointers((cnt) => lk.rd_kafka_DescribeTopics_result_topics(result, cnt));
            if (!t) throw new KafkaError("KAFKA_ADMIN", `${what}: empty result`);
            const error = lk.rd_kafka_TopicDescription_error(t);
            if (error) throw readError(what, error);
            const cnt = new BigUint64Array(1);
            return operations(lk.rd_kafka_TopicDescription_authorized_operations(t, cnt), cnt);
          },
          what,
        );
      } finally {
        lk.rd_kafka_TopicCollection_destroy(collection);
      }
    }
    return this.#request(
      RD.EVENT_DESCRIBECONSUMERGROUPS_RESULT,
      (opts, queue) => {
        withAuthorized(opts);
        lk.rd_kafka_DescribeConsumerGroups(this.#h.rk, names, 1, opts, queue);
      },
      (ev) => {
        const result = lk.rd_kafka_event_DescribeConsumerGroups_result(ev)!;
        const [g] = readPointers((cnt) => lk.rd_kafka_DescribeConsumerGroups_result_groups(result, cnt));
        if (!g) throw new KafkaError("KAFKA_ADMIN", `${what}: empty result`);
        const error = lk.rd_kafka_ConsumerGroupDescription_error(g);
        if (error) throw readError(what, error);
        const cnt = new BigUint64Array(1);
        return operations(lk.rd_kafka_ConsumerGroupDescription_authorized_operations(g, cnt), cnt);
      },
      what,
    );
  }

  /** Frees the handle, at once or after the last request under way; a second call does nothing. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#inFlight === 0) destroyHandle(this.#h);
  }

  #options(): Pointer {
    const lib = rdk();
    const opts = lib.rd_kafka_AdminOptions_new(this.#h.rk, RD.ADMIN_OP_ANY)!;
    const errstr = new ErrorText();
    lib.rd_kafka_AdminOptions_set_request_timeout(opts, this.#timeoutMs, errstr.buf, errstr.size);
    lib.rd_kafka_AdminOptions_set_operation_timeout(opts, this.#timeoutMs, errstr.buf, errstr.size);
    return opts;
  }

  async #awaitEvent(queue: Pointer, type: number, what: string, transient: ReadonlySet<number>): Promise<Pointer> {
    const lib = rdk();
    const ev = await pollQueue(queue, this.#timeoutMs + 5_000);
    const got = lib.rd_kafka_event_type(ev);
    if (got !== type) {
      const e = lib.rd_kafka_event_error(ev);
      lib.rd_kafka_event_destroy(ev);
      throw new KafkaError("KAFKA_ADMIN", `unexpected admin event ${got}${e ? `: ${errName(e)}` : ""}`, e || undefined);
    }
    const e = lib.rd_kafka_event_error(ev);
    if (e !== 0) {
      const msg = String(lib.rd_kafka_event_error_string(ev));
      lib.rd_kafka_event_destroy(ev);
      // Retryable for the codes a later attempt gets past (a timeout, a coordinator loading), not
      // for a refusal such as GROUP_AUTHORIZATION_FAILED, which comes as the request's own error.
      const retryable = isTransient(e) || transient.has(e);
      throw new KafkaError("KAFKA_ADMIN", `${what}: ${errName(e)}: ${msg}`, e, errName(e), retryable);
    }
    return ev;
  }
}

/** The per-topic outcomes of a CreateTopics or DeleteTopics result. */
function topicResults(
  result: Pointer,
  getTopics: "rd_kafka_CreateTopics_result_topics" | "rd_kafka_DeleteTopics_result_topics",
): TopicResult[] {
  const lib = rdk();
  return readPointers((cnt) => lib[getTopics](result, cnt)).map((t) => {
    const err = lib.rd_kafka_topic_result_error(t);
    return {
      name: String(lib.rd_kafka_topic_result_name(t)),
      err,
      errName: err ? errName(err) : "",
      message: err ? String(lib.rd_kafka_topic_result_error_string(t)) : "",
    };
  });
}

function pointerArray(ptrs: readonly Pointer[]): BigUint64Array {
  return BigUint64Array.from(ptrs, (p) => BigInt(p));
}

/** Calls a `T **fn(..., size_t *cntp)` accessor and returns its array of pointers. */
/** rd_kafka_AclOperation_t, as rdkafka.h numbers it. */
const ACL_OPERATIONS = [
  "UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
] as const;
export type AclOperation = (typeof ACL_OPERATIONS)[number];

/** An rd_kafka_error_t* the caller owns: read, destroyed, returned as a KafkaError. */
function readOwnedError(what: string, error: Pointer): KafkaError {
  try {
    return readError(what, error);
  } finally {
    rdk().rd_kafka_error_destroy(error);
  }
}

function readPointers(fn: (cnt: BigUint64Array) => Pointer | null): Pointer[] {
  const cnt = new BigUint64Array(1);
  const arr = fn(cnt);
  const n = Number(cnt[0]);
  const out: Pointer[] = [];
  for (let i = 0; i < n && arr; i++) out.push(read.ptr(arr, i * 8) as Pointer);
  return out;
}

/** The admin API's offset lookups, or a clear error for a library older than 2.3 (offset-lookup.ts asks first). */
function lookups(what: string) {
  const lk = rdkLookups();
  if (!lk) throw new KafkaError("LIBRARY_UNAVAILABLE", `${what}: the loaded librdkafka is older than 2.3`);
  return lk;
}

function throwIf(e: KafkaError | null): void {
  if (e) throw e;
}

/**
 * An rd_kafka_error_t* a result owns (not destroyed here), as a KafkaError, retryable for the codes
 * a later attempt gets past (handle.ts): the replay check stops the worker on the others. Not
 * librdkafka's own retriable flag, which it sets on a group's GROUP_AUTHORIZATION_FAILED.
 */
function readError(what: string, error: Pointer): KafkaError {
  return kafkaError("KAFKA_ADMIN", what, rdk().rd_kafka_error_code(error));
}

/** A config resource's own error (describe or alter refused for that topic), as a KafkaError. */
function throwResourceError(what: string, resource: Pointer): void {
  const lib = rdk();
  const err = lib.rd_kafka_ConfigResource_error(resource);
  if (err === 0) return;
  const detail = lib.rd_kafka_ConfigResource_error_string(resource);
  throw new KafkaError("KAFKA_ADMIN", `${what}: ${errName(err)}: ${detail}`, err, errName(err));
}
