/**
 * Producer over librdkafka whose every send settles on its delivery report.
 *
 * Delivery reports arrive as RD_KAFKA_EVENT_DR batches on the main queue, which a pump polls
 * without blocking while anything is outstanding, and an idle timer twice a second otherwise: the
 * same queue carries the client's logs and errors (TLS, SASL, a fatal idempotence error), which are
 * logged as the consumer's are and would otherwise pile up unseen. No callback runs on
 * librdkafka's threads. A fatal error fails every pending and later send.
 * `produce` (with headers, via rd_kafka_produceva) is for the DLQ; `produceBatch`
 * (rd_kafka_produce_batch, one FFI call per batch) is for bulk traffic such as the generator.
 */
import { ptr, read, type Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import {
  closedError,
  createHandle,
  destroyHandle,
  errName,
  logEvent,
  takeError,
  type Handle,
  type KafkaProps,
} from "./handle.ts";
import { readExactI64 } from "./message.ts";
import { cstr, rdk } from "./native.ts";
import { MESSAGE, RD, VTYPE, VU } from "./structs.ts";

export interface DeliveryReport {
  partition: number;
  offset: number;
}

export interface ProduceOptions {
  key?: string | Uint8Array;
  partition?: number;
  headers?: Array<[string, string | Uint8Array]>;
}

interface Pending {
  remaining: number;
  failed: KafkaError | null;
  /** Partition and offset of the last report (numbers, not an object: one report per message). */
  lastPartition: number;
  lastOffset: number;
  resolve: (d: DeliveryReport) => void;
  reject: (e: KafkaError) => void;
}

/** Writes a string as UTF-8, or bytes as they are, at `at`; returns the byte count (room is the caller's). */
function writeValue(buf: Buffer, at: number, v: string | Uint8Array): number {
  if (typeof v === "string") return buf.write(v, at, "utf8");
  buf.set(v, at);
  return v.length;
}

/** A producer's properties: the caller's over its defaults (no message written twice by a retry). */
export function producerProperties(props: KafkaProps): KafkaProps {
  return { "enable.idempotence": "true", "linger.ms": "5", ...props };
}

/** A non-negative integer below 2^53 (a pointer, a length) as two 32-bit words: no BigInt. */
function writeU64(words: Int32Array, at: number, v: number): void {
  words[at] = (v % 0x1_0000_0000) | 0;
  words[at + 1] = Math.floor(v / 0x1_0000_0000) | 0;
}

export class Producer {
  readonly #h: Handle;
  readonly #main: Pointer;
  readonly #pending = new Map<number, Pending>();
  readonly #topics = new Map<string, Pointer>();
  readonly #drSlots = new BigUint64Array(1024);
  // The same slots as 32-bit halves: reading a pointer this way makes no BigInt per report.
  readonly #drWords = new Uint32Array(this.#drSlots.buffer);
  // Scratch for #produceva, reused by every call (see there).
  #arena = Buffer.alloc(64 * 1024); // grows (copy) when a payload needs more
  #arenaUsed = 0;
  readonly #pinned = new Set<Uint8Array>();
  #vus = new Uint8Array(VU.size * 16);
  #vuWords = new Int32Array(this.#vus.buffer);
  /** The next message's id, its delivery report's opaque: 64 bits written, 64 bits read. */
  #nextId: number;
  #pumping = false;
  #closed = false;
  /** Calls on other threads that hold the handle now (lend). */
  #lent = 0;
  #fatal: KafkaError | null = null;
  readonly #name: string;
  readonly #idle: ReturnType<typeof setInterval>;

  /** `firstMessageId` is for tests that reach ids past 2^32 without sending 2^32 messages. */
  constructor(props: KafkaProps, opts: { firstMessageId?: number } = {}) {
    this.#nextId = opts.firstMessageId ?? 1;
    this.#h = createHandle(RD.PRODUCER, producerProperties(props), (conf) => {
      rdk().rd_kafka_conf_set_events(conf, RD.EVENT_DR);
    });
    this.#main = rdk().rd_kafka_queue_get_main(this.#h.rk)!;
    this.#name = props["client.id"] ?? "producer";
    this.#idle = setInterval(() => {
      if (!this.#pumping && !this.#closed) this.#serve();
    }, 500);
    this.#idle.unref();
  }

  /** The librdkafka handle, for the transactional calls (transaction.ts). */
  get handle(): Pointer {
    if (this.#closed) throw closedError("transaction");
    return this.#h.rk;
  }

  /**
   * Runs `fn`, which hands the handle to another thread (txn-thread.ts), and keeps close() from
   * destroying the handle under that thread meanwhile.
   */
  async lend<T>(fn: () => Promise<T>): Promise<T> {
    this.#lent++;
    try {
      return await fn();
    } finally {
      this.#lent--;
    }
  }

  /** Serves the delivery reports waiting now, without waiting for more. */
  serveReports(): void {
    this.#serve();
  }

  /** Messages handed to librdkafka and not yet reported. */
  get outstanding(): number {
    return this.#closed ? 0 : rdk().rd_kafka_outq_len(this.#h.rk);
  }

  /** Sends one message; resolves on its delivery report, rejects with librdkafka's error. */
  async produce(topic: string, value: string | Uint8Array | null, opts: ProduceOptions = {}): Promise<DeliveryReport> {
    if (this.#fatal) throw this.#fatal;
    if (this.#closed) throw closedError(`produce to ${topic}`);
    const { id, promise } = this.#track(1);
    for (;;) {
      // A queue-full wait may outlast the producer: close() rejected this send and freed the handle.
      if (this.#closed) return promise;
      const err = takeError("KAFKA_DELIVERY", `produce to ${topic}`, this.#produceva(topic, value, opts, id));
      if (!err) break;
      if (err.kafkaCode === RD.ERR__QUEUE_FULL) {
        await this.#serveDeliveryReports();
        continue;
      }
      this.#pending.delete(id);
      throw err;
    }
    this.#startPump();
    return promise;
  }

  /**
   * One rd_kafka_produceva call. Every byte it points at (topic, value, key, header names and
   * values) is written into one reused arena, and the vu array is reused too: librdkafka copies
   * all of them during the call (MSG_F_COPY, headers_add), so nothing has to outlive it. A DLQ
   * send costs about half of what allocating buffers, a DataView and BigInts per call did.
   */
  #produceva(topic: string, value: string | Uint8Array | null, opts: ProduceOptions, id: number): Pointer | null {
    const headers = opts.headers ?? [];
    const count = 5 + (opts.key !== undefined ? 1 : 0) + headers.length;
    if (this.#vus.length < count * VU.size) {
      this.#vus = new Uint8Array(count * VU.size * 2);
      this.#vuWords = new Int32Array(this.#vus.buffer);
    }
    const vus = this.#vus;
    const words = this.#vuWords;
    vus.fill(0, 0, count * VU.size);
    // Pass 1: bytes into the arena, remembering offsets (the arena may grow and move meanwhile).
    this.#arenaUsed = 0;
    const topicAt = this.#put(topic, true);
    const valueAt = value === null ? -1 : this.#put(value, false);
    const valueLen = value === null ? 0 : this.#arenaUsed - valueAt;
    let keyAt = -1;
    let keyLen = 0;
    if (opts.key !== undefined) {
      keyAt = this.#put(opts.key, false);
      keyLen = this.#arenaUsed - keyAt;
    }
    const headerAt: number[] = [];
    for (const [name, v] of headers) {
      headerAt.push(this.#put(name, true));
      const at = this.#put(v, false);
      headerAt.push(at, this.#arenaUsed - at);
    }
    // Pass 2: the vu array, with addresses from the arena's final base.
    const base = ptr(this.#arena);
    let i = 0;
    const slot = (vtype: number): number => {
      const w = (VU.size * i++) >> 2;
      words[w + (VU.vtype >> 2)] = vtype;
      return w + (VU.u >> 2);
    };
    const setU64 = (w: number, v: number): void => writeU64(words, w, v);
    setU64(slot(VTYPE.TOPIC), base + topicAt);
    words[slot(VTYPE.PARTITION)] = opts.partition ?? RD.PARTITION_UA;
    let w = slot(VTYPE.VALUE);
    if (valueAt >= 0 && valueLen > 0) setU64(w, base + valueAt);
    setU64(w + 2, valueLen);
    if (keyAt >= 0) {
      w = slot(VTYPE.KEY);
      if (keyLen > 0) setU64(w, base + keyAt);
      setU64(w + 2, keyLen);
    }
    for (let h = 0; h < headerAt.length; h += 3) {
      w = slot(VTYPE.HEADER);
      setU64(w, base + headerAt[h]!);
      setU64(w + 2, base + headerAt[h + 1]!);
      setU64(w + 4, headerAt[h + 2]!);
    }
    words[slot(VTYPE.MSGFLAGS)] = RD.MSG_F_COPY;
    setU64(slot(VTYPE.OPAQUE), id);
    return rdk().rd_kafka_produceva(this.#h.rk, vus, count);
  }

  /** Appends a string (UTF-8, optionally NUL-terminated) or bytes to the arena; returns its offset. */
  #put(v: string | Uint8Array, nul: boolean): number {
    const at = this.#arenaUsed;
    const need = (typeof v === "string" ? v.length * 3 : v.length) + 1;
    if (at + need > this.#arena.length) {
      const next = Buffer.alloc(Math.max(this.#arena.length * 2, at + need));
      this.#arena.copy(next, 0, 0, at);
      this.#arena = next;
    }
    let n = writeValue(this.#arena, at, v);
    if (nul) this.#arena[at + n++] = 0;
    this.#arenaUsed = at + n;
    return at;
  }

  /**
   * Sends many values to one topic with librdkafka's partitioner in one FFI call per chunk;
   * resolves when every one is delivered, rejects on the first failure.
   */
  async produceBatch(topic: string, values: readonly (string | Uint8Array)[]): Promise<void> {
    if (values.length === 0) return;
    if (this.#fatal) throw this.#fatal;
    if (this.#closed) throw closedError(`produce to ${topic}`);
    const rkt = this.#topic(topic);
    const { id, promise } = this.#track(values.length);
    // Values go straight into one slab (strings encoded in place, no Uint8Array each) and pointers
    // are written as 32-bit halves: no BigInt per message.
    let bound = 0;
    for (const v of values) bound += typeof v === "string" ? v.length * 3 : v.length;
    const slab = Buffer.allocUnsafe(Math.max(1, bound));
    // librdkafka reads the slab only inside produce_batch, but a queue-full wait (await) may come
    // between two calls: pin it so the collector cannot free it meanwhile.
    this.#pinned.add(slab);
    const base = ptr(slab);
    const msgs = new Uint8Array(MESSAGE.size * values.length);
    const words = new Int32Array(msgs.buffer);
    const dv = new DataView(msgs.buffer);
    const setU64 = (byteAt: number, v: number): void => writeU64(words, byteAt >> 2, v);
    let off = 0;
    for (let i = 0; i < values.length; i++) {
      const len = writeValue(slab, off, values[i]!);
      const m = i * MESSAGE.size;
      setU64(m + MESSAGE.payload, base + off);
      setU64(m + MESSAGE.len, len);
      setU64(m + MESSAGE._private, id);
      off += len;
    }
    const count = values.length;
    let start = 0;
    while (start < count) {
      if (this.#closed) break; // close() rejected the batch's promise and freed rkt meanwhile
      const n = count - start;
      const view = msgs.subarray(start * MESSAGE.size);
      const accepted = rdk().rd_kafka_produce_batch(rkt, RD.PARTITION_UA, RD.MSG_F_COPY, view, n);
      // Messages are accepted in order; the first rejected one carries the reason in its err field.
      start += accepted;
      if (accepted < n) {
        const err = dv.getInt32(start * MESSAGE.size + MESSAGE.err, true);
        if (err !== RD.ERR__QUEUE_FULL) {
          const p = this.#pending.get(id)!;
          p.remaining -= n - accepted;
          p.failed ??= new KafkaError("KAFKA_DELIVERY", `produce to ${topic}: ${errName(err)}`, err, errName(err));
          break;
        }
        this.#startPump();
        await this.#serveDeliveryReports();
      }
    }
    this.#pinned.delete(slab);
    this.#settleIfDone(id);
    this.#startPump();
    await promise;
  }

  /** Resolves when every outstanding message has its delivery report, or rejects after timeoutMs. */
  async flush(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    if (this.#closed) throw closedError("flush");
    while (this.outstanding > 0 || this.#pending.size > 0) {
      if (Date.now() > deadline)
        throw new KafkaError("KAFKA_DELIVERY", `flush: ${this.outstanding} messages undelivered after ${timeoutMs} ms`);
      this.#serve();
      await Bun.sleep(1);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#idle);
    const lib = rdk();
    for (const rkt of this.#topics.values()) lib.rd_kafka_topic_destroy(rkt);
    lib.rd_kafka_queue_destroy(this.#main);
    // A thread still inside a transactional call would use a freed handle: left to the process's end.
    if (this.#lent === 0) destroyHandle(this.#h);
    for (const p of this.#pending.values())
      p.reject(new KafkaError("KAFKA_DELIVERY", "producer closed before delivery"));
    this.#pending.clear();
  }

  #topic(name: string): Pointer {
    let rkt = this.#topics.get(name);
    if (!rkt) {
      rkt = rdk().rd_kafka_topic_new(this.#h.rk, cstr(name), null)!;
      if (!rkt) throw new KafkaError("KAFKA_CLIENT", `cannot create topic handle for ${name}`);
      this.#topics.set(name, rkt);
    }
    return rkt;
  }

  #track(count: number): { id: number; promise: Promise<DeliveryReport> } {
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<DeliveryReport>();
    this.#pending.set(id, { remaining: count, failed: null, lastPartition: -1, lastOffset: -1, resolve, reject });
    // close() may reject it while the send still waits for queue room, before the caller holds it:
    // handled here so that is no unhandled rejection; the caller still gets the rejection.
    promise.catch(() => {});
    return { id, promise };
  }

  #settleIfDone(id: number): void {
    const p = this.#pending.get(id);
    if (!p || p.remaining > 0) return;
    this.#pending.delete(id);
    if (p.failed) p.reject(p.failed);
    else p.resolve({ partition: p.lastPartition, offset: p.lastOffset });
  }

  /** Serves every delivery report waiting on the main queue. */
  #serve(): number {
    if (this.#closed) return 0;
    const lib = rdk();
    let served = 0;
    for (;;) {
      const ev = lib.rd_kafka_queue_poll(this.#main, 0);
      if (!ev) return served;
      if (lib.rd_kafka_event_type(ev) === RD.EVENT_DR) {
        for (;;) {
          const n = Number(lib.rd_kafka_event_message_array(ev, this.#drSlots, this.#drSlots.length));
          if (n === 0) break;
          const w = this.#drWords;
          for (let i = 0; i < n; i++) this.#onReport((w[2 * i]! + w[2 * i + 1]! * 0x1_0000_0000) as Pointer);
          served += n;
        }
      } else if (logEvent(ev, this.#name) && lib.rd_kafka_event_type(ev) === RD.EVENT_ERROR) {
        if (lib.rd_kafka_event_error_is_fatal(ev)) this.#failAll(lib.rd_kafka_event_error(ev), ev);
      }
      lib.rd_kafka_event_destroy(ev);
    }
  }

  /** A fatal error: the handle can send nothing more; every pending and later send fails with it. */
  #failAll(err: number, ev: Pointer): void {
    const reason = String(rdk().rd_kafka_event_error_string(ev));
    this.#fatal = new KafkaError("KAFKA_DELIVERY", `producer failed: ${errName(err)}: ${reason}`, err, errName(err));
    for (const p of this.#pending.values()) p.reject(this.#fatal);
    this.#pending.clear();
  }

  #onReport(m: Pointer): void {
    const id = read.u32(m, MESSAGE._private) + read.u32(m, MESSAGE._private + 4) * 0x1_0000_0000;
    const p = this.#pending.get(id);
    if (!p) return;
    const err = read.i32(m, MESSAGE.err);
    if (err !== 0)
      p.failed ??= new KafkaError(
        "KAFKA_DELIVERY",
        `delivery failed: ${errName(err)}: ${rdk().rd_kafka_err2str(err)}`,
        err,
        errName(err),
      );
    else {
      p.lastPartition = read.i32(m, MESSAGE.partition);
      p.lastOffset = readExactI64(m as Pointer, MESSAGE.offset);
    }
    p.remaining--;
    this.#settleIfDone(id);
  }

  async #serveDeliveryReports(): Promise<void> {
    this.#serve();
    await Bun.sleep(1);
  }

  #startPump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    const tick = () => {
      if (this.#closed) {
        this.#pumping = false;
        return;
      }
      this.#serve();
      if (this.#pending.size === 0) {
        this.#pumping = false;
        return;
      }
      setTimeout(tick, 1);
    };
    setTimeout(tick, 0);
  }
}
