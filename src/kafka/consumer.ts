/**
 * Group consumer over librdkafka: batched, never blocking the event loop, offsets stored and
 * committed only when the caller says so.
 *
 * - Fetch: rd_kafka_consume_batch_queue with timeout 0, so a poll returns at once; the caller
 *   paces itself (see Consumer#poll).
 * - Rebalance: rebalance.ts (a revocation waits for the caller's commit, then `completeRevoke()`).
 * - Commit: rd_kafka_commit_queue onto a private queue, polled without blocking; the promise
 *   settles with per-partition results.
 */
import { CString, JSCallback, ptr, read, type Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import { log } from "../log.ts";
import {
  closedError,
  createHandle,
  destroyHandle,
  errName,
  kafkaError,
  pollQueue,
  takeError,
  type Handle,
  type KafkaProps,
} from "./handle.ts";
import { copyBytes, copyIntoSlab, isPassedOver, isRecordError, readExactI64, readHeaders } from "./message.ts";
import type { Message } from "./message.ts";
import { HEADER_FRAME, loadBatchCopy, META, META_STRIDE, type BatchCopy, type CopyCaps } from "./batch-copy.ts";
import { partitionFetches, type PartitionFetch } from "./fetch-state.ts";
import { standingOf, type Standing } from "./heartbeat-proof.ts";
import { RdClock } from "./rd-clock.ts";
import { cstr, rdk } from "./native.ts";
import { QueueWakeup } from "./queue-wakeup.ts";
import { fromNativeList, withNativeList, type TopicPartition } from "./partition-list.ts";
import { Rebalance } from "./rebalance.ts";
import { MESSAGE, RD } from "./structs.ts";
import { GroupMetadata } from "./transaction.ts";

/** How long one watermark query waits before it is asked again (queryWatermarks). */
const WATERMARK_SLICE_MS = 2_000;

/** The largest slab a consumer keeps for its next batches (ConsumerOptions.reuseSlab). */
const REUSED_SLAB_MAX_BYTES = 4 * 1024 * 1024;

/** Between two asks of a coordinator that answered it is moving (committed). */
const COMMITTED_RETRY_MS = 200;

export interface ConsumerOptions {
  /** librdkafka properties; must include bootstrap.servers and group.id. */
  props: KafkaProps;
  topics: string[];
  /** Most messages one poll returns. */
  maxBatch?: number;
  /**
   * Copy message headers too: into the batch's slab by the native copy (librdkafka parses them,
   * about 3 µs a record for the DLQ's eight), or FFI calls per header without it.
   */
  readHeaders?: boolean;
  /** Read each message's timestamp (one FFI call per message); default true. */
  readTimestamps?: boolean;
  /**
   * Most bytes of each value copied out of librdkafka; a longer value's first bytes are copied and
   * its whole size set as `valueBytes` (RECORD_MAX_BYTES: a record too large to take costs only
   * what its envelope needs). All unless given.
   */
  valueMaxBytes?: number;
  /** Copy each message's key; default true (the worker reads no key). */
  readKeys?: boolean;
  /**
   * Copy each batch out in one native call (batch-copy.ts); default true. False keeps the per-message
   * path, which tests use as the reference. Ignored when headers are read (they need the message).
   */
  nativeCopy?: boolean;
  /**
   * The bytes of a poll's messages (values, keys, headers) are the caller's only until its next
   * poll, which copies into the same memory: for a caller that turns each message into something of
   * its own at once (the DLQ filler), so no batch allocates and frees a slab of its own.
   */
  reuseSlab?: boolean;
  /**
   * Pause each newly assigned partition inside the assignment callback, before librdkafka can hand
   * out any of its records; the caller resumes it. The poll that serves an assignment can return
   * records fetched for it at once, before the caller has seen the assignment at all.
   */
  assignPaused?: boolean;
  /**
   * Hand out, in offset order with the records, each offset librdkafka passed over on purpose (a
   * control record, an aborted record) as a Message with `passedOver` set: the worker accounts for
   * every offset (delivery/offsets/gaps.ts). Other readers never see them.
   */
  passedOver?: boolean;
}


/**
 * What a group member's loop and delivery use of the consumer (worker/, delivery/): the delivery
 * simulation (test/sim/) gives them a simulated member with the same surface.
 */
export type GroupConsumer = Pick<
  Consumer,
  | "assignment"
  | "pendingRevoke"
  | "revokeLost"
  | "takeAssigned"
  | "waitForMessages"
  | "wake"
  | "poll"
  | "commit"
  | "pause"
  | "resume"
  | "completeRevoke"
  | "close"
  | "onStanding"
> &
  Partial<Pick<Consumer, "positions" | "seek">>;

/** What a reader of a topic range uses (dlq/reader.ts): partitions assigned directly, read to their ends. */
export type RangeReader = Pick<Consumer, "assign" | "poll" | "endReached" | "queryWatermarks">;

/** A consumer's properties: the caller's, between the defaults it may change and those it may not. */
export function consumerProperties(props: KafkaProps): KafkaProps {
  return {
    "auto.offset.reset": "earliest",
    ...props,
    // Last, so no caller's property can undo them: offsets are committed explicitly from what is
    // durable, never from what was handed out (the CLI refuses both as KAFKA_PROP_*, config.ts).
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
  };
}

const ERROR_TEXT = new TextDecoder("utf-8", { fatal: false });
const HEADER_NAME = new TextDecoder("utf-8", { fatal: false });
/** Header places whose last name is kept (#headerName): more than any writer here sends. */
const MAX_KNOWN_HEADER_NAMES = 32;

/** The client may not use the group, read the topic or talk to the cluster: no retry helps. */
const AUTHORIZATION_ERRORS: ReadonlySet<number> = new Set([
  RD.ERR_TOPIC_AUTHORIZATION_FAILED,
  RD.ERR_GROUP_AUTHORIZATION_FAILED,
  RD.ERR_CLUSTER_AUTHORIZATION_FAILED,
]);

/** Records librdkafka reports without words are said at most this often a partition (#sayUndecodable). */
const UNDECODABLE_SAY_MS = 1_000;

export class Consumer {
  /** The last unreadable record said, a partition: its words, when, and how many like it were not. */
  readonly #undecodableSaid = new Map<number, { text: string | undefined; at: number; notShown: number }>();
  readonly #h: Handle;
  readonly #queue: Pointer;
  readonly #commitQueue: Pointer;
  readonly #wakeup: QueueWakeup;
  readonly #slots: BigUint64Array;
  readonly #slotsPtr: Pointer;
  readonly #readHeaders: boolean;
  readonly #reuseSlab: boolean;
  #slab: Uint8Array | null = null;
  readonly #readTimestamps: boolean;
  readonly #caps: CopyCaps;
  readonly #headerNames: Array<{ bytes: Uint8Array; name: string }> = [];
  // Per-poll scratch arrays, reused: payload pointers, lengths and the messages to destroy.
  readonly #sources: Array<Pointer | null> = [];
  readonly #lengths: number[] = [];
  readonly #kept: Pointer[] = [];
  readonly #topicNames = new Map<number, string>();
  readonly #batchCopy: BatchCopy | null;
  #lastRkt = 0;
  #lastTopic = "";
  readonly #meta: Float64Array;
  readonly #metaPtr: Pointer;
  readonly #rebalance = new Rebalance(() => this.#h.rk);
  /** Each partition's offset at its last end-of-partition event (`enable.partition.eof=true`). */
  readonly #ends = new Map<number, number>();
  #closed = false;
  /** An error no retry gets past, thrown by the next poll. */
  #fatal: KafkaError | null = null;
  #closing = false;
  #commitChain: Promise<unknown> = Promise.resolve();
  /** The topic whose partitions' fetch states are kept: the first subscribed, if any. */
  readonly #topic: string | null;
  #fetches = new Map<number, PartitionFetch>();
  readonly #proofListeners: Array<(standing: Standing) => void> = [];
  readonly #rdClock = new RdClock();
  readonly #passedOver: boolean;

  constructor(opts: ConsumerOptions) {
    const lib = rdk();
    this.#rebalance.assignPaused = opts.assignPaused ?? false;
    this.#passedOver = opts.passedOver ?? false;
    this.#topic = opts.topics[0] ?? null;
    this.#h = createHandle(RD.CONSUMER, consumerProperties(opts.props), (conf, callbacks) => {
      const cb = new JSCallback(
        (rk: Pointer, err: number, partitions: Pointer) => this.#rebalance.onRebalance(rk, err, partitions),
        { args: ["ptr", "i32", "ptr", "ptr"], returns: "void" },
      );
      // Statistics come only with statistics.interval.ms set (kafka-clients.ts, under exactly-once),
      // served by the poll like the rebalance callback: on this thread.
      const statsCb = new JSCallback(
        (_rk: Pointer, json: Pointer, len: number | bigint) => {
          this.#onStatistics(json, Number(len));
          return 0; // librdkafka frees the JSON
        },
        { args: ["ptr", "ptr", "usize", "ptr"], returns: "i32" },
      );
      callbacks.push(cb, statsCb);
      lib.rd_kafka_conf_set_rebalance_cb(conf, cb.ptr);
      lib.rd_kafka_conf_set_stats_cb(conf, statsCb.ptr);
    });
    const rk = this.#h.rk;
    lib.rd_kafka_poll_set_consumer(rk);
    this.#queue = lib.rd_kafka_queue_get_consumer(rk)!;
    this.#commitQueue = lib.rd_kafka_queue_new(rk)!;
    this.#wakeup = new QueueWakeup(this.#queue);
    this.#readHeaders = opts.readHeaders ?? false;
    this.#reuseSlab = opts.reuseSlab ?? false;
    this.#readTimestamps = opts.readTimestamps ?? true;
    this.#caps = { value: opts.valueMaxBytes ?? -1, key: opts.readKeys === false ? 0 : -1, headers: this.#readHeaders };
    this.#slots = new BigUint64Array(opts.maxBatch ?? 2048);
    this.#slotsPtr = ptr(this.#slots);
    this.#batchCopy = opts.nativeCopy === false ? null : loadBatchCopy();
    this.#meta = new Float64Array(this.#batchCopy ? this.#slots.length * META_STRIDE : 1);
    this.#metaPtr = ptr(this.#meta);
    // No topics: a group handle for committed() only (tools and tests reading a group's offsets).
    const err =
      opts.topics.length === 0
        ? 0
        : withNativeList(
            opts.topics.map((topic) => ({ topic, partition: -1 })),
            (list) => lib.rd_kafka_subscribe(rk, list),
          );
    if (err !== 0) {
      this.#destroy();
      throw kafkaError("KAFKA_CLIENT", `subscribe to ${opts.topics.join(",")}`, err);
    }
  }

  /**
   * The group's metadata as this member holds it now, for a transaction's offsets (transaction.ts):
   * the caller destroys it.
   */
  groupMetadata(): GroupMetadata {
    const md = rdk().rd_kafka_consumer_group_metadata(this.#h.rk);
    if (!md) throw new KafkaError("KAFKA_CLIENT", "no group metadata: the consumer has no group.id");
    return new GroupMetadata(md);
  }

  /**
   * Calls `fn` with the member's standing each statistics sample shows: the last heartbeat the
   * coordinator accepted, or its refusal (heartbeat-proof.ts). The membership lease's facts.
   */
  onStanding(fn: (standing: Standing) => void): void {
    this.#proofListeners.push(fn);
  }

  /** librdkafka's fetcher state of a partition of the (first) subscribed topic, from its last statistics. */
  fetchState(partition: number): PartitionFetch | null {
    return this.#fetches.get(partition) ?? null;
  }

  #onStatistics(json: Pointer, len: number): void {
    if (this.#closed) return;
    try {
      let stats: unknown;
      try {
        stats = JSON.parse(String(new CString(json, 0, len)));
      } catch {
        return; // statistics that do not parse say nothing of the member (heartbeat-proof.ts)
      }
      // The proof first: what the stats show of fetching may never hold up a membership lease.
      if (this.#proofListeners.length > 0) {
        const standing = standingOf(stats, this.#rdClock.toMono());
        if (standing) for (const fn of this.#proofListeners) fn(standing);
      }
      const fetches = this.#topic === null ? null : partitionFetches(stats, this.#topic);
      if (fetches) this.#fetches = fetches;
    } catch (e) {
      log.warn("librdkafka statistics not read", { err: e instanceof Error ? e.message : String(e) });
    }
  }

  /**
   * Records and record errors librdkafka has fetched and not yet handed out: its prefetch queue,
   * bounded by queued.max.messages.kbytes as scripts/librdkafka/patches/fetch-budget.patch counts it.
   */
  get prefetched(): number {
    return this.#closed ? 0 : Number(rdk().rd_kafka_queue_length(this.#queue));
  }

  /** Partitions currently assigned to this member. */
  get assignment(): readonly TopicPartition[] {
    return this.#rebalance.assignment;
  }

  /** A revocation waiting for the caller to commit and call completeRevoke(). */
  get pendingRevoke(): readonly TopicPartition[] | null {
    return this.#rebalance.pendingRevoke;
  }

  /** The pending revocation is of partitions the group already gave to others. */
  get revokeLost(): boolean {
    return this.#rebalance.revokeLost;
  }

  /** The partitions each assignment since the last call added, oldest first (revocations: pendingRevoke). */
  takeAssigned(): TopicPartition[][] {
    return this.#rebalance.takeAssigned();
  }

  /**
   * Resolves when a poll may return something (messages, a rebalance, an error), or after
   * `timeoutMs`. Meant for after a poll came back empty: waiting costs no CPU, unlike polling.
   */
  waitForMessages(timeoutMs: number): Promise<void> {
    return this.#closed ? Promise.resolve() : this.#wakeup.wait(timeoutMs);
  }
  /** Ends a waitForMessages() in progress: the caller has something else to see to. */
  wake(): void {
    if (!this.#closed) this.#wakeup.wake();
  }


  /**
   * Returns at once with up to maxBatch messages (possibly none). Serves rebalance, log and error
   * callbacks. Returns nothing while a revocation is pending, unless `revoking`: the loop polls
   * while it settles one, so the group keeps the member (max.poll.interval.ms) and a loss is heard.
   */
  poll(max = this.#slots.length, revoking = false): Message[] {
    if (this.#fatal) throw this.#fatal;
    if (this.#closed || (this.#rebalance.pendingRevoke && !revoking) || max <= 0) return [];
    const lib = rdk();
    const n = Number(
      lib.rd_kafka_consume_batch_queue(this.#queue, 0, this.#slotsPtr, Math.min(max, this.#slots.length)),
    );
    if (n < 0) throw new KafkaError("KAFKA_CLIENT", "rd_kafka_consume_batch_queue failed");
    if (n === 0) return [];
    this.#topicNames.clear();
    this.#lastRkt = -1;
    return this.#batchCopy ? this.#copyNative(this.#batchCopy, n) : this.#copyPerMessage(n);
  }

  /** Two native calls for the whole batch; per message only the JS object and a view. */
  #copyNative(copy: BatchCopy, n: number): Message[] {
    const slab = this.#slabFor(Math.max(1, copy.size(this.#slotsPtr, n, this.#metaPtr, this.#caps)));
    // Names now, while the messages hold their topic handles: copy() destroys them.
    this.#resolveTopics(n);
    // See copyIntoSlab: move a small array's inline storage to a real buffer before ptr().
    void slab.buffer;
    copy.copy(this.#slotsPtr, n, ptr(slab), this.#metaPtr, this.#readTimestamps, this.#caps);
    const meta = this.#meta;
    const frames = this.#caps.headers ? new DataView(slab.buffer, slab.byteOffset, slab.byteLength) : null;
    const out: Message[] = [];
    let off = 0;
    for (let i = 0, r = 0; i < n; i++, r += META_STRIDE) {
      const err = meta[r + META.err]!;
      const partition = meta[r + META.partition]!;
      const offset = meta[r + META.offset]!;
      if (err !== 0) {
        // An error's payload, when it has one, is librdkafka's text for it.
        const textLen = meta[r + META.valueLen]!;
        if (isRecordError(err)) {
          const text = textLen > 0 ? ERROR_TEXT.decode(slab.subarray(off, off + textLen)) : undefined;
          out.push(this.#undecodable(meta[r + META.rkt]!, partition, offset, err, text));
        } else if (isPassedOver(err)) {
          if (this.#passedOver) out.push(this.#passed(meta[r + META.rkt]!, partition, offset));
        } else this.#consumerError(err, partition, offset);
        // Decoded only where it names a record's fate; skipped over either way.
        if (textLen > 0) off += textLen;
        continue;
      }
      if (!Number.isSafeInteger(offset)) throw new KafkaError("KAFKA_CLIENT", `offset of ${partition} exceeds 2^53`);
      const valueLen = meta[r + META.valueLen]!;
      const keyLen = meta[r + META.keyLen]!;
      let value: Uint8Array | null = null;
      if (valueLen >= 0) {
        value = slab.subarray(off, off + valueLen);
        off += valueLen;
      }
      let key: Uint8Array | null = null;
      if (keyLen >= 0) {
        key = slab.subarray(off, off + keyLen);
        off += keyLen;
      }
      const m: Message = {
        topic: this.#topicName(meta[r + META.rkt]!),
        partition,
        offset,
        timestamp: meta[r + META.timestamp]!,
        value,
        key: this.#caps.key === 0 ? null : key,
        headers: undefined,
      };
      if (frames) {
        const count = meta[r + META.headerCount]!;
        const headers: Array<[string, Uint8Array]> = [];
        for (let k = 0; k < count; k++) {
          const nameLen = frames.getUint32(off, true);
          const valueLen = frames.getInt32(off + 4, true);
          off += HEADER_FRAME;
          const name = this.#headerName(k, slab, off, nameLen);
          off += nameLen;
          // A null value is handed out empty, as the per-message path does.
          headers.push([name, valueLen > 0 ? slab.subarray(off, off + valueLen) : new Uint8Array(0)]);
          if (valueLen > 0) off += valueLen;
        }
        m.headers = headers;
      }
      if (value !== null && meta[r + META.valueWhole]! > valueLen) m.valueBytes = meta[r + META.valueWhole]!;
      out.push(m);
    }
    return out;
  }

  /**
   * The memory a batch of `size` bytes is copied into: the last batch's, where it may be reused and
   * fits. A batch past REUSED_SLAB_MAX_BYTES (large envelopes) gets its own, so a burst of them
   * leaves nothing held for the life of the process.
   */
  #slabFor(size: number): Uint8Array {
    if (!this.#reuseSlab || size > REUSED_SLAB_MAX_BYTES) return new Uint8Array(size);
    if (this.#slab === null || this.#slab.length < size) this.#slab = new Uint8Array(Math.max(size, 64 * 1024));
    return this.#slab;
  }

  /**
   * The header name at `slab[off, off + len)`, the k-th of its message. Records of one writer carry
   * the same names in the same order (the DLQ's envelopes, eight), so the name last decoded at that
   * place is compared byte for byte and reused: no string is made per header.
   */
  #headerName(k: number, slab: Uint8Array, off: number, len: number): string {
    const known = this.#headerNames[k];
    if (known && known.bytes.length === len) {
      let same = true;
      for (let i = 0; i < len; i++)
        if (known.bytes[i] !== slab[off + i]) {
          same = false;
          break;
        }
      if (same) return known.name;
    }
    const bytes = slab.slice(off, off + len);
    const name = HEADER_NAME.decode(bytes);
    if (k < MAX_KNOWN_HEADER_NAMES) this.#headerNames[k] = { bytes, name };
    return name;
  }

  /**
   * The topic of each message of this poll, read through its handle while a live message holds it.
   * Names are kept for this poll only: a handle freed once no message holds it can come back at the
   * same address as another topic's.
   */
  #resolveTopics(n: number): void {
    const meta = this.#meta;
    for (let i = 0, r = META.rkt; i < n; i++, r += META_STRIDE) this.#topicName(meta[r]!);
  }

  /**
   * An error message that stands for no record: logged; one no retry gets past (the client may not
   * use the group or read the topic) fails the next poll, so the worker stops with a line that
   * names it instead of polling an empty queue for ever.
   */
  #consumerError(err: number, partition: number, offset: number): void {
    if (err === RD.ERR__PARTITION_EOF) {
      this.#ends.set(partition, offset);
      return;
    }
    if (AUTHORIZATION_ERRORS.has(err)) {
      this.#fatal ??= kafkaError("KAFKA_CLIENT", "kafka consumer refused", err, false);
      log.error("kafka consumer refused: not authorized", { code: errName(err), partition });
      return;
    }
    log.warn("kafka consumer error", { code: errName(err), partition });
  }

  /** An offset librdkafka passed over on purpose and said so: no record, accounted for all the same. */
  #passed(rkt: number, partition: number, offset: number): Message {
    return { topic: this.#topicName(rkt), partition, offset, timestamp: -1, value: null, key: null, passedOver: true };
  }

  /** A record at this offset that librdkafka could not decode: no value, its error instead. */
  /** `text`: librdkafka's own words for this record (which batch, how many bytes), when it gave any. */
  #undecodable(rkt: number, partition: number, offset: number, err: number, text?: string): Message {
    const error = `${errName(err)}: ${rdk().rd_kafka_err2str(err)}`;
    this.#sayUndecodable(partition, offset, errName(err), text);
    const m: Message = { topic: this.#topicName(rkt), partition, offset, timestamp: -1, value: null, key: null, error };
    if (text !== undefined) m.errorText = text;
    return m;
  }

  /**
   * One line a batch, not one a record: librdkafka reports an unreadable batch offset by offset, with
   * the same words naming the batch (its offsets, its size), and a bomb of 200,000 records would write
   * 200,000 lines. Records reported without words are said at most once a second a partition; the
   * next line counts those left out. Every one of them still becomes an envelope.
   */
  #sayUndecodable(partition: number, offset: number, code: string, text: string | undefined): void {
    const now = performance.now();
    const said = this.#undecodableSaid.get(partition);
    if (said && said.text === text && (text !== undefined || now - said.at < UNDECODABLE_SAY_MS)) {
      said.notShown++;
      return;
    }
    const notShown = said?.notShown ? { previous_not_shown: said.notShown } : {};
    const fields = { partition, offset, code, text, ...notShown };
    log.warn("kafka record librdkafka could not decode; it goes to the DLQ", fields);
    this.#undecodableSaid.set(partition, { text, at: now, notShown: 0 });
  }

  /** The topic of a handle that a live message holds, or that this poll already resolved. */
  #topicName(rkt: number): string {
    // Almost every message of a poll has the topic of the one before.
    if (rkt === this.#lastRkt) return this.#lastTopic;
    // Group-level errors (GROUP_AUTHORIZATION_FAILED, …) come with no topic handle: reading a name
    // through NULL is a segfault.
    if (rkt === 0) return "";
    let topic = this.#topicNames.get(rkt);
    if (topic === undefined) {
      topic = String(rdk().rd_kafka_topic_name(rkt as Pointer));
      this.#topicNames.set(rkt, topic);
    }
    this.#lastRkt = rkt;
    this.#lastTopic = topic;
    return topic;
  }

  /** The reference path: fields read one FFI call at a time. */
  #copyPerMessage(n: number): Message[] {
    const lib = rdk();
    const out: Message[] = [];
    const sources = this.#sources;
    const lengths = this.#lengths;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const m = Number(this.#slots[i]) as Pointer;
      const err = read.i32(m, MESSAGE.err);
      if (err !== 0) {
        // Per-partition consumer errors (e.g. topic deleted) carry no record; a record librdkafka
        // could not decode still stands at its offset.
        const partition = read.i32(m, MESSAGE.partition);
        if (isRecordError(err)) {
          // Kept like a record (no bytes to copy), so out[] stays parallel to the kept messages.
          sources[kept] = null;
          lengths[kept] = 0;
          this.#kept[kept++] = m;
          const payload = read.ptr(m, MESSAGE.payload) as Pointer | null;
          const len = read.u32(m, MESSAGE.len);
          const text = payload && len > 0 ? ERROR_TEXT.decode(copyBytes(payload, len) ?? new Uint8Array()) : undefined;
          out.push(this.#undecodable(read.ptr(m, MESSAGE.rkt), partition, readExactI64(m, MESSAGE.offset), err, text));
          continue;
        }
        if (isPassedOver(err) && this.#passedOver) {
          // Kept as a record error is, so out[] stays parallel to the kept messages.
          sources[kept] = null;
          lengths[kept] = 0;
          this.#kept[kept++] = m;
          out.push(this.#passed(read.ptr(m, MESSAGE.rkt), partition, readExactI64(m, MESSAGE.offset)));
          continue;
        }
        if (isPassedOver(err)) {
          lib.rd_kafka_message_destroy(m);
          continue;
        }
        // Only an end-of-partition event's offset is used; read without the 2^53 check, which may not
        // stop a poll over an error message.
        this.#consumerError(err, partition, Number(read.i64(m, MESSAGE.offset)));
        lib.rd_kafka_message_destroy(m);
        continue;
      }
      const topic = this.#topicName(read.ptr(m, MESSAGE.rkt));
      // A tombstone has a NULL payload: keep it null, not an empty value.
      sources[kept] = (read.ptr(m, MESSAGE.payload) || null) as Pointer | null;
      // Low 32 bits suffice: librdkafka caps a message at 1 GB (message.max.bytes); no BigInt per message.
      const whole = read.u32(m, MESSAGE.len);
      lengths[kept] = this.#caps.value >= 0 ? Math.min(whole, this.#caps.value) : whole;
      this.#kept[kept++] = m;
      const message: Message = {
        topic,
        partition: read.i32(m, MESSAGE.partition),
        offset: readExactI64(m, MESSAGE.offset),
        timestamp: this.#readTimestamps ? Number(lib.rd_kafka_message_timestamp(m, null)) : -1,
        value: null,
        key:
          read.ptr(m, MESSAGE.key) && this.#caps.key !== 0
            ? copyBytes(read.ptr(m, MESSAGE.key) as Pointer, read.u32(m, MESSAGE.key_len))
            : null,
        headers: this.#readHeaders ? readHeaders(m) : undefined,
      };
      if (sources[kept - 1] !== null && whole > lengths[kept - 1]!) message.valueBytes = whole;
      out.push(message);
    }
    const values = copyIntoSlab(sources, lengths, kept);
    for (let i = 0; i < kept; i++) {
      out[i]!.value = values[i]!;
      lib.rd_kafka_message_destroy(this.#kept[i]!);
    }
    return out;
  }

  /**
   * Commits (topic, partition, next offset) synchronously with respect to the broker but without
   * blocking the event loop. Resolves with per-partition results; rejects when any partition failed.
   */
  commit(offsets: readonly TopicPartition[]): Promise<TopicPartition[]> {
    const run = async () => {
      if (offsets.length === 0) return [];
      if (this.#closed) throw closedError("commit");
      const lib = rdk();
      const err = withNativeList(offsets, (list) =>
        lib.rd_kafka_commit_queue(this.#h.rk, list, this.#commitQueue, null, null),
      );
      if (err !== 0) throw kafkaError("KAFKA_COMMIT", "commit", err);
      const ev = await pollQueue(this.#commitQueue, 60_000, () => !this.#closed);
      try {
        const results = fromNativeList(lib.rd_kafka_event_topic_partition_list(ev));
        const top = lib.rd_kafka_event_error(ev);
        const bad = results.filter((r) => r.err);
        if (top !== 0 && top !== RD.ERR__NO_OFFSET /* nothing new to commit */)
          throw kafkaError("KAFKA_COMMIT", "commit", top);
        if (bad.length) {
          throw new KafkaError(
            "KAFKA_COMMIT",
            `commit failed for ${bad.map((b) => `${b.topic}[${b.partition}]: ${errName(b.err!)}`).join(", ")}`,
            bad[0]!.err,
            errName(bad[0]!.err!),
          );
        }
        return results;
      } finally {
        lib.rd_kafka_event_destroy(ev);
      }
    };
    // One commit at a time, in call order, so a later commit can never be overtaken.
    const p = this.#commitChain.then(run, run);
    this.#commitChain = p.catch(() => {});
    return p;
  }

  /**
   * Stops fetching from these partitions while keeping them (and the group membership, which
   * poll() goes on serving); records already fetched for them are not handed out.
   */
  pause(partitions: readonly TopicPartition[]): void {
    if (this.#closed || partitions.length === 0) return;
    const err = withNativeList(partitions, (list) => rdk().rd_kafka_pause_partitions(this.#h.rk, list));
    if (err !== 0) throw kafkaError("KAFKA_CLIENT", "pause", err);
  }

  /**
   * Reads these partitions from the offsets given, outside any group rebalance: for a handle made
   * with no topics (tools reading a topic from an offset, such as `dlq inspect`).
   */
  assign(partitions: readonly TopicPartition[]): void {
    if (this.#closed) throw closedError("assign");
    // An end found before belongs to a read that is over: this one has not reached it yet.
    this.#ends.clear();
    const err = withNativeList(partitions, (list) => rdk().rd_kafka_assign(this.#h.rk, list));
    if (err !== 0) throw kafkaError("KAFKA_CLIENT", "assign", err);
  }

  /**
   * Reads these assigned partitions again from the offsets given (librdkafka drops what it had
   * queued for them). Asynchronous: a paused partition fetches from there once resumed.
   */
  seek(partitions: readonly TopicPartition[]): void {
    if (this.#closed || partitions.length === 0) return;
    const error = withNativeList(partitions, (list) => rdk().rd_kafka_seek_partitions(this.#h.rk, list, 0));
    if (!error) return;
    const err = rdk().rd_kafka_error_code(error);
    rdk().rd_kafka_error_destroy(error);
    throw kafkaError("KAFKA_CLIENT", "seek", err);
  }

  /** Fetches again from paused partitions, from the position after the last record handed out. */
  resume(partitions: readonly TopicPartition[]): void {
    if (this.#closed || partitions.length === 0) return;
    const err = withNativeList(partitions, (list) => rdk().rd_kafka_resume_partitions(this.#h.rk, list));
    if (err !== 0) throw kafkaError("KAFKA_CLIENT", "resume", err);
  }

  /** Gives up the pending revoked partitions; call after their offsets are committed. */
  completeRevoke(): void {
    this.#rebalance.completeRevoke();
  }

  /**
   * The offset where the fetcher last found this partition's end (its high watermark then), with
   * `enable.partition.eof=true`; undefined before. A reader of a range knows it has read every
   * record below that offset even when the last offsets hold no record for it (a transaction's
   * marker, aborted records under read_committed).
   */
  endReached(partition: number): number | undefined {
    return this.#ends.get(partition);
  }

  /**
   * Where librdkafka stands in each partition, a local read: every offset below was handed out or
   * passed over (a transaction's control record, an aborted transaction's records). -1001 where
   * nothing was handed out yet.
   */
  positions(partitions: readonly TopicPartition[]): TopicPartition[] {
    if (this.#closed || partitions.length === 0) return [];
    return withNativeList(partitions, (list) => {
      const err = rdk().rd_kafka_position(this.#h.rk, list);
      if (err !== 0) throw kafkaError("KAFKA_CLIENT", "position", err);
      return fromNativeList(list);
    });
  }

  /**
   * Committed offsets as the broker has them (blocking up to timeoutMs: for tools and tests). A
   * coordinator that moves or loads (a broker restarted: NOT_COORDINATOR, LOAD_IN_PROGRESS) is
   * asked again within the same deadline: librdkafka hands such an answer back at once.
   */
  committed(partitions: readonly TopicPartition[], timeoutMs = 5000): TopicPartition[] {
    if (this.#closed) throw closedError("committed");
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const left = Math.max(1, Math.round(deadline - performance.now()));
      try {
        return withNativeList(partitions, (list) => {
          const err = rdk().rd_kafka_committed(this.#h.rk, list, left);
          if (err !== 0) throw kafkaError("KAFKA_CLIENT", "committed", err);
          return fromNativeList(list);
        });
      } catch (e) {
        if (!(e instanceof KafkaError) || !e.retryable || left <= COMMITTED_RETRY_MS) throw e;
        Bun.sleepSync(COMMITTED_RETRY_MS);
      }
    }
  }

  /**
   * For each partition, the first offset whose record's timestamp is at least `timestampMs`, or
   * -1 when none is (blocking up to timeoutMs: for tools; the worker asks Admin.listOffsets).
   */
  offsetsForTimes(
    topic: string,
    partitions: readonly number[],
    timestampMs: number,
    timeoutMs = 10_000,
  ): Map<number, number> {
    if (this.#closed) throw closedError("offsetsForTimes");
    const items = partitions.map((partition) => ({ topic, partition, offset: BigInt(Math.floor(timestampMs)) }));
    return withNativeList(items, (list) => {
      const err = rdk().rd_kafka_offsets_for_times(this.#h.rk, list, timeoutMs);
      if (err !== 0) throw kafkaError("KAFKA_CLIENT", `offsets for times of ${topic}`, err);
      const out = new Map<number, number>();
      for (const r of fromNativeList(list)) {
        if (r.err) throw kafkaError("KAFKA_CLIENT", `offset for a time of ${topic}[${r.partition}]`, r.err);
        out.set(r.partition, Number(r.offset));
      }
      return out;
    });
  }

  /**
   * Low and high watermark last seen by the fetcher (cached, no network round trip); null until a
   * fetch has seen them. librdkafka keeps −1001 there before its first fetch of the partition, which
   * as a number would make a partition that never fetched look caught up (lag 0).
   */
  watermarks(topic: string, partition: number): { low: number; high: number } | null {
    if (this.#closed) return null;
    const low = new BigInt64Array(1);
    const high = new BigInt64Array(1);
    if (rdk().rd_kafka_get_watermark_offsets(this.#h.rk, cstr(topic), partition, low, high) !== 0) return null;
    if (high[0]! < 0n) return null;
    return { low: Number(low[0]), high: Number(high[0]) };
  }

  /**
   * Low and high watermark asked from the broker (blocking up to timeoutMs: for tools and tests).
   * The query goes to the leader the client last heard of, and librdkafka asks no other broker:
   * one that died times out, or is dropped from the metadata (_DESTROY_BROKER); one that handed
   * leadership back answers NOT_LEADER_OR_FOLLOWER; while the leader moves the metadata may name
   * none (_UNKNOWN_PARTITION). So after any answer but a refusal of access the topic's metadata is
   * asked anew and the query made again, until the deadline, when the last answer is reported.
   */
  queryWatermarks(topic: string, partition: number, timeoutMs = 5000): { low: number; high: number } {
    if (this.#closed) throw closedError("watermarks");
    const low = new BigInt64Array(1);
    const high = new BigInt64Array(1);
    const deadline = performance.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      // A slice of the time, not all of it: a leader that died is asked until the slice ends.
      const slice = Math.max(1, Math.min(WATERMARK_SLICE_MS, Math.ceil(deadline - performance.now())));
      const err = rdk().rd_kafka_query_watermark_offsets(this.#h.rk, cstr(topic), partition, low, high, slice);
      if (err === 0) return { low: Number(low[0]), high: Number(high[0]) };
      if (AUTHORIZATION_ERRORS.has(err) || performance.now() >= deadline)
        throw kafkaError("KAFKA_CLIENT", `watermarks of ${topic}[${partition}]`, err);
      this.#refreshTopic(topic, Math.max(1, Math.min(WATERMARK_SLICE_MS, Math.ceil(deadline - performance.now()))));
      Bun.sleepSync(Math.min(200, 10 * 2 ** attempt, Math.max(0, deadline - performance.now())));
    }
  }

  /**
   * Asks the topic's metadata now: the watermark query asks the leader the client last heard of,
   * and a client without a subscription to the topic refreshes it only every few minutes. A
   * failure here is the next query's to report.
   */
  #refreshTopic(topic: string, timeoutMs: number): void {
    const lib = rdk();
    const rkt = lib.rd_kafka_topic_new(this.#h.rk, cstr(topic), null);
    if (!rkt) return;
    try {
      const out = new BigUint64Array(1);
      if (lib.rd_kafka_metadata(this.#h.rk, 0, rkt, out, timeoutMs) === 0 && out[0])
        lib.rd_kafka_metadata_destroy(Number(out[0]) as Pointer);
    } finally {
      lib.rd_kafka_topic_destroy(rkt);
    }
  }

  /**
   * Leaves the group, within `timeoutMs`, without blocking the event loop. The caller commits first:
   * close() gives partitions up without committing. rd_kafka_consumer_close() would wait on the JS
   * thread with no limit while the coordinator does not answer (librdkafka #3740), so neither a
   * shutdown timeout nor a second signal could run: the close is queued instead, and its queue
   * served until librdkafka says the consumer is closed or the time is up. Resolves false when it
   * was not closed in time (the handle is freed without leaving the group; the group's session
   * timeout removes the member).
   */
  async close(timeoutMs = 10_000): Promise<boolean> {
    if (this.#closed || this.#closing) return true;
    this.#closing = true;
    this.#rebalance.closing = true;
    this.completeRevoke();
    const lib = rdk();
    const rk = this.#h.rk;
    const refused = takeError("KAFKA_CLIENT", "consumer close", lib.rd_kafka_consumer_close_queue(rk, this.#queue));
    if (refused) log.warn("consumer close", { err: refused });
    const deadline = Date.now() + timeoutMs;
    while (!refused && !lib.rd_kafka_consumer_closed(rk) && Date.now() < deadline) {
      // Serves the last rebalance callback (the revocation) and drops what the queue still holds.
      const n = Number(lib.rd_kafka_consume_batch_queue(this.#queue, 0, this.#slotsPtr, this.#slots.length));
      for (let i = 0; i < n; i++) lib.rd_kafka_message_destroy(Number(this.#slots[i]) as Pointer);
      await Bun.sleep(10);
    }
    const closed = !refused && lib.rd_kafka_consumer_closed(rk) === 1;
    if (!closed) log.warn("consumer did not leave the group in time; freed without leaving", { timeout_ms: timeoutMs });
    this.#destroy(RD.DESTROY_F_NO_CONSUMER_CLOSE);
    return closed;
  }

  #destroy(flags = 0): void {
    this.#closed = true;
    const lib = rdk();
    this.#wakeup.close();
    lib.rd_kafka_queue_destroy(this.#queue);
    lib.rd_kafka_queue_destroy(this.#commitQueue);
    destroyHandle(this.#h, flags);
  }
}
