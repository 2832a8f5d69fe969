/**
 * Kafka transactions (KIP-98) on a Producer, their offsets sent for a consumer's group and fenced
 * by its metadata (KIP-447): records produced in a transaction and the offsets sent with it become
 * visible together, to read_committed readers and to the group, or not at all.
 *
 * librdkafka's transactional calls block their thread until the coordinator answers (send_offsets
 * waits for its requests whatever timeout it is given), so each is made on a thread of its own
 * (txn-thread.ts) while the event loop serves delivery reports, which commit's and abort's own
 * flush wait for and which only the event loop serves. Where that thread cannot be had, a call is
 * made on the event loop in slices of at most `sliceMs` and made again while it times out: init,
 * commit and abort resume where they stopped; send_offsets does not resume, so the same offsets
 * with the same metadata are sent again (what its documentation asks), in longer slices, since a
 * slice is also its requests' timeout; there a coordinator that does not answer holds the event
 * loop up to transaction.timeout.ms.
 */
import type { Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import { errName } from "./handle.ts";
import { rdk } from "./native.ts";
import { toNativeList, type TopicPartition } from "./partition-list.ts";
import type { DeliveryReport, Producer, ProduceOptions } from "./producer.ts";
import { loadTxnThread, type TxnThread } from "./txn-thread.ts";

/** Longest a transactional call blocks the event loop before it is made again. */
const SLICE_MS = 50;
/**
 * send_offsets_to_transaction's slice: it bounds its requests' own timeout too (AddOffsetsToTxn,
 * TxnOffsetCommit), so a slice shorter than a busy coordinator's answer would never succeed. The
 * event loop waits this long at most while the coordinator is slow; on loopback it answers in ms.
 */
const SEND_OFFSETS_SLICE_MS = 1_000;

/**
 * A transactional call's failure, with librdkafka's verdict. `abortable`: this transaction is lost
 * (its records and offsets count for nothing once aborted) and a new one may follow. `fatal`: the
 * producer can do nothing more; PRODUCER_FENCED (a newer instance of its transactional.id) is one,
 * and no retry can help. Neither: a later call may get past it (`retryable`).
 */
export class TransactionError extends KafkaError {
  override name = "TransactionError";
  constructor(
    message: string,
    kafkaCode: number,
    kafkaName: string,
    retryable: boolean,
    readonly abortable: boolean,
    readonly fatal: boolean,
  ) {
    super("KAFKA_TRANSACTION", message, kafkaCode, kafkaName, retryable);
  }

  /** A newer producer with the same transactional.id took over: this worker must stop. */
  get fenced(): boolean {
    return FENCED.has(this.kafkaName ?? "");
  }
}

const FENCED = new Set(["_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"]);

/** Reads an rd_kafka_error_t* from a transactional call and destroys it (null → null). */
function takeTransactionError(what: string, error: Pointer | null): TransactionError | null {
  if (!error) return null;
  const lib = rdk();
  const code = lib.rd_kafka_error_code(error);
  const e = new TransactionError(
    `${what}: ${errName(code)}: ${lib.rd_kafka_error_string(error)}`,
    code,
    errName(code),
    lib.rd_kafka_error_is_retriable(error) !== 0,
    lib.rd_kafka_error_txn_requires_abort(error) !== 0,
    lib.rd_kafka_error_is_fatal(error) !== 0,
  );
  lib.rd_kafka_error_destroy(error);
  return e;
}

/**
 * A consumer's group metadata (group id, generation or member epoch, member id) as it stood when
 * taken: offsets sent with it are refused once the member has left that generation, so a member
 * that lost its partitions cannot commit them. Take it when the offsets are computed, send every
 * retry with the same one, and destroy it once they are settled.
 */
export class GroupMetadata {
  #ptr: Pointer | null;
  constructor(native: Pointer) {
    this.#ptr = native;
  }
  get pointer(): Pointer {
    if (!this.#ptr) throw new KafkaError("KAFKA_CLIENT", "group metadata used after it was destroyed");
    return this.#ptr;
  }
  destroy(): void {
    if (this.#ptr) rdk().rd_kafka_consumer_group_metadata_destroy(this.#ptr);
    this.#ptr = null;
  }
}

export type TransactionState = "uninitialized" | "ready" | "open" | "ending" | "failed";

/**
 * How long a call on its thread may take before the producer is given up: librdkafka bounds each
 * call by its timeout, save where it waits for a coordinator that never comes (librdkafka issues
 * #5456, #5511; scripts/librdkafka/patches/coordinator-timeout.patch covers one such wait).
 */
const stuckAfter = (timeoutMs: number) => 2 * timeoutMs + 10_000;

export class Transactions {
  readonly #producer: Producer;
  readonly #sliceMs: number;
  readonly #thread: TxnThread | null;
  readonly #stuckAfterMs: (timeoutMs: number) => number;
  #state: TransactionState = "uninitialized";

  /**
   * `producer` was made with a `transactional.id`; nothing else may produce through it. The calls
   * go on threads of their own (txn-thread.ts) unless `onEventLoop`, or unless that cannot be built.
   * `thread` and `stuckAfterMs` are for tests.
   */
  constructor(
    producer: Producer,
    opts: { sliceMs?: number; onEventLoop?: boolean; thread?: TxnThread; stuckAfterMs?: number } = {},
  ) {
    this.#producer = producer;
    this.#sliceMs = opts.sliceMs ?? SLICE_MS;
    this.#thread = opts.onEventLoop ? null : (opts.thread ?? loadTxnThread());
    const fixed = opts.stuckAfterMs;
    this.#stuckAfterMs = fixed === undefined ? stuckAfter : () => fixed;
  }

  /** ready: none open; open: records and offsets may join; ending: a commit or abort is under way. */
  get state(): TransactionState {
    return this.#state;
  }

  /**
   * Registers the transactional.id with its coordinator, fencing every earlier producer of the same
   * id and ending (aborting) what it left open. Once, before the first transaction.
   */
  async init(timeoutMs: number): Promise<void> {
    await this.#call(
      "init transactions",
      timeoutMs,
      (slice) => rdk().rd_kafka_init_transactions(this.#producer.handle, slice),
      { fn: "rd_kafka_init_transactions" },
    );
    this.#state = "ready";
  }

  /** Opens a transaction: records produced from now on, and offsets sent, belong to it. Does not block. */
  begin(): void {
    const e = takeTransactionError("begin transaction", rdk().rd_kafka_begin_transaction(this.#producer.handle));
    if (e) throw this.#failed(e);
    this.#state = "open";
  }

  /**
   * Adds the group's offsets (next offset to read, with their metadata) to the open transaction.
   * Refused with an abortable error when `group`'s generation is no longer the member's.
   */
  async sendOffsets(offsets: readonly TopicPartition[], group: GroupMetadata, timeoutMs: number): Promise<void> {
    const list = toNativeList(offsets);
    try {
      await this.#call(
        "send offsets to transaction",
        timeoutMs,
        (slice) => rdk().rd_kafka_send_offsets_to_transaction(this.#producer.handle, list, group.pointer, slice),
        { fn: "rd_kafka_send_offsets_to_transaction", a: list, b: group.pointer, sliceMs: SEND_OFFSETS_SLICE_MS },
      );
    } finally {
      rdk().rd_kafka_topic_partition_list_destroy(list);
    }
  }

  /** Sends one record in the open transaction; resolves on its delivery report. */
  produce(topic: string, value: string | Uint8Array | null, opts?: ProduceOptions): Promise<DeliveryReport> {
    return this.#producer.produce(topic, value, opts);
  }

  /** Resolves once every record produced has its delivery report. */
  flush(timeoutMs: number): Promise<void> {
    return this.#producer.flush(timeoutMs);
  }

  /** Delivers what the transaction produced, then commits it with its offsets. */
  async commit(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    this.#state = "ending";
    try {
      await this.#producer.flush(timeoutMs);
    } catch {
      // Reports still outstanding at the deadline: the commit's own flush says so, typed.
    }
    await this.#call(
      "commit transaction",
      Math.max(0, deadline - performance.now()),
      (slice) => rdk().rd_kafka_commit_transaction(this.#producer.handle, slice),
      { fn: "rd_kafka_commit_transaction" },
    );
    this.#state = "ready";
  }

  /** Gives the producer up (kafka/producer.ts close): what it still holds is reported undelivered. */
  close(): void {
    this.#producer.close();
  }

  /** Ends the transaction unseen: its records are never shown to read_committed readers, its offsets never count. */
  async abort(timeoutMs: number): Promise<void> {
    this.#state = "ending";
    await this.#call(
      "abort transaction",
      timeoutMs,
      (slice) => rdk().rd_kafka_abort_transaction(this.#producer.handle, slice),
      { fn: "rd_kafka_abort_transaction" },
    );
    this.#state = "ready";
  }

  /**
   * One transactional call: on a thread of its own, given the whole `timeoutMs`, with delivery
   * reports served here meanwhile; or, without one, on the event loop in slices until it succeeds,
   * fails for good, or `timeoutMs` passed (see the module's comment).
   */
  async #call(
    what: string,
    timeoutMs: number,
    call: (sliceMs: number) => Pointer | null,
    native: { fn: keyof ReturnType<typeof rdk>; a?: Pointer; b?: Pointer; sliceMs?: number },
  ): Promise<void> {
    const thread = this.#thread;
    if (thread) {
      const fn = (rdk()[native.fn] as unknown as { ptr: Pointer }).ptr;
      const rk = this.#producer.handle;
      const tick = () => this.#producer.serveReports();
      const args = { tick, ...(native.a ? { a: native.a, b: native.b! } : {}) };
      const call = this.#producer.lend(() => thread.call(fn, rk, timeoutMs, args));
      // A call that never returns would hold every commit for ever, with nothing logged. Past the
      // limit it is left to its thread (the handle stays lent, so close() does not free it) and the
      // producer fails for good: the commits make it again and send the envelopes again.
      const limit = this.#stuckAfterMs(timeoutMs);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stuck = new Promise<"stuck">((resolve) => (timer = setTimeout(() => resolve("stuck"), limit)));
      const result = await Promise.race([call, stuck]).finally(() => clearTimeout(timer));
      if (result === "stuck") {
        const text = `${what}: no answer within ${limit} ms (librdkafka waits for a coordinator that does not come)`;
        throw this.#failed(new TransactionError(text, -185, "_TIMED_OUT", false, false, true));
      }
      const e = takeTransactionError(what, result);
      if (e) throw this.#failed(e);
      return;
    }
    const sliceMs = native.sliceMs ?? this.#sliceMs;
    const deadline = performance.now() + timeoutMs;
    for (let slices = 0; ; slices++) {
      this.#producer.serveReports();
      const slice = Math.max(1, Math.min(sliceMs, Math.ceil(deadline - performance.now())));
      const e = takeTransactionError(what, call(slice));
      if (!e) return;
      if (!e.retryable || e.abortable || e.fatal || performance.now() >= deadline) throw this.#failed(e);
      // A coordinator that answers late gets the event loop back for longer each time, up to a slice.
      await Bun.sleep(Math.min(sliceMs, 2 ** Math.min(slices, 10)));
    }
  }

  #failed(e: TransactionError): TransactionError {
    if (e.fatal) this.#state = "failed";
    else if (e.abortable) this.#state = "open"; // still open until aborted
    return e;
  }
}

/** `transactional.id` for a worker instance: one per group and instance, so restarts fence their predecessors. */
export function transactionalId(group: string, instance: string): string {
  return `${group}-${instance}`;
}
