/**
 * Producer over librdkafka whose every send settles on its delivery report.
 *
 * Delivery reports arrive as RD_KAFKA_EVENT_DR batches on the main queue, which a pump polls
 * without blocking while anything is outstanding; no callback runs on librdkafka's threads.
 * `produce` (with headers, via rd_kafka_produceva) is for the DLQ; `produceBatch`
 * (rd_kafka_produce_batch, one FFI call per batch) is for bulk traffic such as the generator.
 */
import { ptr, read, type Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import { createHandle, destroyHandle, errName, takeError, type Handle, type KafkaProps } from "./handle.ts";
import { cstr, rdk } from "./native.ts";
import { MESSAGE, RD, VTYPE, VU } from "./structs.ts";

const ERR_QUEUE_FULL = -184;

export interface Delivery {
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
  last: Delivery;
  resolve: (d: Delivery) => void;
  reject: (e: KafkaError) => void;
}

const encoder = new TextEncoder();
const toBytes = (v: string | Uint8Array): Uint8Array => (typeof v === "string" ? encoder.encode(v) : v);

export class Producer {
  readonly #h: Handle;
  readonly #main: Pointer;
  readonly #pending = new Map<number, Pending>();
  readonly #topics = new Map<string, Pointer>();
  readonly #drSlots = new BigUint64Array(1024);
  #nextId = 1;
  #pumping = false;
  #closed = false;

  constructor(props: KafkaProps) {
    this.#h = createHandle(RD.PRODUCER, { "enable.idempotence": "true", "linger.ms": "5", ...props }, (conf) => {
      rdk().rd_kafka_conf_set_events(conf, RD.EVENT_DR);
    });
    this.#main = rdk().rd_kafka_queue_get_main(this.#h.rk)!;
  }

  /** Messages handed to librdkafka and not yet reported. */
  get outstanding(): number {
    return rdk().rd_kafka_outq_len(this.#h.rk);
  }

  /** Sends one message; resolves on its delivery report, rejects with librdkafka's error. */
  async produce(topic: string, value: string | Uint8Array | null, opts: ProduceOptions = {}): Promise<Delivery> {
    const { id, promise } = this.#track(1);
    const headers = opts.headers ?? [];
    const count = 5 + (opts.key !== undefined ? 1 : 0) + headers.length;
    const vus = new Uint8Array(VU.size * count);
    const dv = new DataView(vus.buffer);
    const keep: Uint8Array[] = []; // keeps every buffer a pointer in `vus` refers to alive through the call
    let i = 0;
    const slot = (vtype: number) => { const base = VU.size * i++; dv.setInt32(base + VU.vtype, vtype, true); return base + VU.u; };
    const addr = (b: Uint8Array) => { keep.push(b); return b.length ? BigInt(ptr(b)) : 0n; };
    const topicC = cstr(topic);
    dv.setBigUint64(slot(VTYPE.TOPIC), addr(topicC), true);
    dv.setInt32(slot(VTYPE.PARTITION), opts.partition ?? RD.PARTITION_UA, true);
    let at = slot(VTYPE.VALUE);
    const val = value === null ? null : toBytes(value);
    dv.setBigUint64(at, val ? addr(val) : 0n, true);
    dv.setBigUint64(at + 8, BigInt(val?.length ?? 0), true);
    if (opts.key !== undefined) {
      const k = toBytes(opts.key);
      at = slot(VTYPE.KEY);
      dv.setBigUint64(at, addr(k), true);
      dv.setBigUint64(at + 8, BigInt(k.length), true);
    }
    for (const [name, v] of headers) {
      const b = toBytes(v);
      at = slot(VTYPE.HEADER);
      dv.setBigUint64(at, addr(cstr(name)), true);
      dv.setBigUint64(at + 8, addr(b), true);
      dv.setBigInt64(at + 16, BigInt(b.length), true);
    }
    dv.setInt32(slot(VTYPE.MSGFLAGS), RD.MSG_F_COPY, true);
    dv.setBigUint64(slot(VTYPE.OPAQUE), BigInt(id), true);
    for (;;) {
      const err = takeError("KAFKA_DELIVERY", `produce to ${topic}`, rdk().rd_kafka_produceva(this.#h.rk, vus, count));
      if (!err) break;
      if (err.kafkaCode === ERR_QUEUE_FULL) { await this.#drain(); continue; }
      this.#pending.delete(id);
      throw err;
    }
    void keep;
    this.#startPump();
    return promise;
  }

  /**
   * Sends many values to one topic with librdkafka's partitioner in one FFI call per chunk;
   * resolves when every one is delivered, rejects on the first failure.
   */
  async produceBatch(topic: string, values: readonly (string | Uint8Array)[]): Promise<void> {
    if (values.length === 0) return;
    const rkt = this.#topic(topic);
    const { id, promise } = this.#track(values.length);
    const bytes = values.map(toBytes);
    let total = 0;
    for (const b of bytes) total += b.length;
    const slab = new Uint8Array(Math.max(1, total));
    void slab.buffer; // settle the storage before taking its address (see copyIntoSlab)
    const base = ptr(slab);
    const msgs = new Uint8Array(MESSAGE.size * bytes.length);
    const dv = new DataView(msgs.buffer);
    let off = 0;
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i]!;
      slab.set(b, off);
      const m = i * MESSAGE.size;
      dv.setBigUint64(m + MESSAGE.payload, BigInt(base + off), true);
      dv.setBigUint64(m + MESSAGE.len, BigInt(b.length), true);
      dv.setBigUint64(m + MESSAGE._private, BigInt(id), true);
      off += b.length;
    }
    let start = 0;
    while (start < bytes.length) {
      const n = bytes.length - start;
      const view = msgs.subarray(start * MESSAGE.size);
      const accepted = rdk().rd_kafka_produce_batch(rkt, RD.PARTITION_UA, RD.MSG_F_COPY, view, n);
      // Messages are accepted in order; the first rejected one carries the reason in its err field.
      start += accepted;
      if (accepted < n) {
        const err = dv.getInt32(start * MESSAGE.size + MESSAGE.err, true);
        if (err !== ERR_QUEUE_FULL) {
          const p = this.#pending.get(id)!;
          p.remaining -= n - accepted;
          p.failed ??= new KafkaError("KAFKA_DELIVERY", `produce to ${topic}: ${errName(err)}`, err, errName(err));
          break;
        }
        this.#startPump();
        await this.#drain();
      }
    }
    this.#settleIfDone(id);
    this.#startPump();
    await promise;
  }

  /** Resolves when every outstanding message has its delivery report, or rejects after timeoutMs. */
  async flush(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.outstanding > 0 || this.#pending.size > 0) {
      if (Date.now() > deadline) throw new KafkaError("KAFKA_DELIVERY", `flush: ${this.outstanding} messages undelivered after ${timeoutMs} ms`);
      this.#serve();
      await Bun.sleep(1);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const lib = rdk();
    for (const rkt of this.#topics.values()) lib.rd_kafka_topic_destroy(rkt);
    lib.rd_kafka_queue_destroy(this.#main);
    destroyHandle(this.#h);
    for (const p of this.#pending.values()) p.reject(new KafkaError("KAFKA_DELIVERY", "producer closed before delivery"));
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

  #track(count: number): { id: number; promise: Promise<Delivery> } {
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<Delivery>();
    this.#pending.set(id, { remaining: count, failed: null, last: { partition: -1, offset: -1 }, resolve, reject });
    return { id, promise };
  }

  #settleIfDone(id: number): void {
    const p = this.#pending.get(id);
    if (!p || p.remaining > 0) return;
    this.#pending.delete(id);
    if (p.failed) p.reject(p.failed);
    else p.resolve(p.last);
  }

  /** Serves every delivery report waiting on the main queue. */
  #serve(): number {
    const lib = rdk();
    let served = 0;
    for (;;) {
      const ev = lib.rd_kafka_queue_poll(this.#main, 0);
      if (!ev) return served;
      if (lib.rd_kafka_event_type(ev) === RD.EVENT_DR) {
        for (;;) {
          const n = Number(lib.rd_kafka_event_message_array(ev, this.#drSlots, this.#drSlots.length));
          if (n === 0) break;
          for (let i = 0; i < n; i++) this.#onReport(Number(this.#drSlots[i]) as Pointer);
          served += n;
        }
      }
      lib.rd_kafka_event_destroy(ev);
    }
  }

  #onReport(m: Pointer): void {
    const id = read.u32(m, MESSAGE._private);
    const p = this.#pending.get(id);
    if (!p) return;
    const err = read.i32(m, MESSAGE.err);
    if (err !== 0) p.failed ??= new KafkaError("KAFKA_DELIVERY", `delivery failed: ${errName(err)}: ${rdk().rd_kafka_err2str(err)}`, err, errName(err));
    else p.last = { partition: read.i32(m, MESSAGE.partition), offset: Number(read.i64(m, MESSAGE.offset)) };
    p.remaining--;
    this.#settleIfDone(id);
  }

  async #drain(): Promise<void> {
    this.#serve();
    await Bun.sleep(1);
  }

  #startPump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    const tick = () => {
      if (this.#closed) { this.#pumping = false; return; }
      this.#serve();
      if (this.#pending.size === 0) { this.#pumping = false; return; }
      setTimeout(tick, 1);
    };
    setTimeout(tick, 0);
  }
}
