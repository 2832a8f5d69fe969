/** Copying rd_kafka_message_t out of native memory before it is destroyed. */
import { CString, ptr, read, toArrayBuffer, type Pointer } from "bun:ffi";
import { KafkaError } from "../errors.ts";
import { libc } from "./libc.ts";
import { rdk } from "./native.ts";
import { RD } from "./structs.ts";

export interface Message {
  topic: string;
  partition: number;
  /** Exact: offsets are read as two 32-bit halves and refused above 2^53 rather than rounded. */
  offset: number;
  /** Broker or producer timestamp, ms since the epoch; -1 when absent. */
  timestamp: number;
  /** The payload bytes (a view into the batch's own copy); null for a tombstone. */
  value: Uint8Array | null;
  /** The value's whole size where `value` holds only its first bytes (ConsumerOptions.valueMaxBytes). */
  valueBytes?: number;
  key: Uint8Array | null;
  headers?: Array<[string, Uint8Array]>;
  /**
   * Set for a record at this offset that librdkafka could not decode (`_BAD_MSG`, `_BAD_COMPRESSION`):
   * its error, name and text. The record still has to be accounted for, so it is dead-lettered.
   */
  error?: string;
  /**
   * librdkafka's text for that record, when it gave one: for a record batch it could not
   * decompress, the batch's offsets and compressed size.
   */
  errorText?: string;
  /**
   * Set where no record stands at this offset: librdkafka passed it over on purpose (a transaction's
   * control record, an aborted transaction's record) and said so. Handed out only to a consumer that
   * asks (ConsumerOptions.passedOver); it has no value and is never a record.
   */
  passedOver?: true;
}

/** An offset librdkafka passed over on purpose and reported (ERR__NOOP, passed-over-reports.patch). */
export function isPassedOver(err: number): boolean {
  return err === RD.ERR__NOOP;
}

/** Per-message errors that stand for a record at that offset, not for the partition or topic. */
export function isRecordError(err: number): boolean {
  return err === RD.ERR__BAD_MSG || err === RD.ERR__BAD_COMPRESSION;
}

/** Reads a signed 64-bit field exactly as a number; throws past 2^53 instead of rounding. */
export function readExactI64(p: Pointer, offset: number): number {
  const lo = read.u32(p, offset);
  const hi = read.i32(p, offset + 4);
  if (hi >= 0x200000 || hi < -0x200000) throw new KafkaError("KAFKA_CLIENT", `64-bit value at +${offset} exceeds 2^53`);
  return hi * 0x1_0000_0000 + lo;
}

/**
 * Copies many native buffers into one fresh slab and returns a view per buffer (null stays null).
 * `sources` and `lengths` are parallel; the slab outlives the native messages.
 */
export function copyIntoSlab(
  sources: Array<Pointer | null>,
  lengths: number[],
  count: number,
): Array<Uint8Array | null> {
  let total = 0;
  for (let i = 0; i < count; i++) total += lengths[i]!;
  const slab = new Uint8Array(Math.max(1, total));
  // A small typed array starts with inline storage; the first subarray() moves it to a real
  // ArrayBuffer, copying only what was written so far, and later memcpys into the old pointer are
  // lost (seen: corrupted records in multi-message polls). Touching .buffer moves it before ptr().
  void slab.buffer;
  const base = ptr(slab);
  const out = new Array<Uint8Array | null>(count);
  let off = 0;
  for (let i = 0; i < count; i++) {
    const src = sources[i]!;
    const len = lengths[i]!;
    if (src === null) {
      out[i] = null;
      continue;
    }
    if (len > 0) libc.memcpy((base + off) as Pointer, src, len);
    out[i] = slab.subarray(off, off + len);
    off += len;
  }
  return out;
}

/** Copies `len` bytes at `src` into a fresh array (the native buffer dies with its message). */
export function copyBytes(src: Pointer | null, len: number): Uint8Array | null {
  if (!src) return null;
  if (len === 0) return new Uint8Array(0);
  return new Uint8Array(toArrayBuffer(src, 0, len).slice(0));
}

const headerName = new BigUint64Array(1);
const headerValue = new BigUint64Array(1);
const headerSize = new BigUint64Array(1);
const headersOut = new BigUint64Array(1);

/** Reads all headers of a message (only when asked: it costs a few FFI calls per header). */
export function readHeaders(msg: Pointer): Array<[string, Uint8Array]> {
  const lib = rdk();
  if (lib.rd_kafka_message_headers(msg, headersOut) !== 0) return [];
  const hdrs = Number(headersOut[0]) as Pointer;
  const out: Array<[string, Uint8Array]> = [];
  for (let i = 0; lib.rd_kafka_header_get_all(hdrs, i, headerName, headerValue, headerSize) === 0; i++) {
    const name = String(new CString(Number(headerName[0]) as Pointer));
    out.push([name, copyBytes(Number(headerValue[0]) as Pointer, Number(headerSize[0])) ?? new Uint8Array(0)]);
  }
  return out;
}
