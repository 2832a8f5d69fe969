/** rd_kafka_topic_partition_list_t to and from plain objects. */
import { CString, read, toArrayBuffer, type Pointer } from "bun:ffi";
import { libc } from "./libc.ts";
import { cstr, rdk } from "./native.ts";
import { TOPIC_PARTITION, TOPIC_PARTITION_LIST } from "./structs.ts";

export interface TopicPartition {
  topic: string;
  partition: number;
  /** Next offset to read (a commit position); absent when the list carries none. */
  offset?: bigint;
  /** librdkafka error code for this partition, 0 when fine. */
  err?: number;
  /** A commit's metadata (UTF-8): stored with the committed offset, read back by committed(). */
  metadata?: string;
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** Allocates a list; the caller destroys it with rd_kafka_topic_partition_list_destroy. */
export function toNativeList(items: readonly TopicPartition[]): Pointer {
  const lib = rdk();
  const list = lib.rd_kafka_topic_partition_list_new(Math.max(1, items.length))!;
  for (const tp of items) {
    const elem = lib.rd_kafka_topic_partition_list_add(list, cstr(tp.topic), tp.partition)!;
    if (tp.offset !== undefined) writeI64(elem, TOPIC_PARTITION.offset, tp.offset);
    if (tp.metadata !== undefined) {
      const bytes = utf8.encode(tp.metadata);
      const mem = libc.malloc(Math.max(1, bytes.length))!;
      if (bytes.length) libc.memcpy(mem, bytes, bytes.length);
      writeU64(elem, TOPIC_PARTITION.metadata, BigInt(mem));
      writeU64(elem, TOPIC_PARTITION.metadata_size, BigInt(bytes.length));
    }
  }
  return list;
}

export function fromNativeList(list: Pointer | null): TopicPartition[] {
  if (!list) return [];
  const cnt = read.i32(list, TOPIC_PARTITION_LIST.cnt);
  const elems = read.ptr(list, TOPIC_PARTITION_LIST.elems) as Pointer;
  const out: TopicPartition[] = new Array(cnt);
  for (let i = 0; i < cnt; i++) {
    const base = i * TOPIC_PARTITION.size;
    const meta = read.ptr(elems, base + TOPIC_PARTITION.metadata) as Pointer | null;
    const metaSize = Number(read.u64(elems, base + TOPIC_PARTITION.metadata_size));
    out[i] = {
      topic: String(new CString(read.ptr(elems, base + TOPIC_PARTITION.topic) as Pointer)),
      partition: read.i32(elems, base + TOPIC_PARTITION.partition),
      offset: read.i64(elems, base + TOPIC_PARTITION.offset),
      err: read.i32(elems, base + TOPIC_PARTITION.err),
      ...(meta && metaSize > 0 ? { metadata: fromUtf8.decode(new Uint8Array(toArrayBuffer(meta, 0, metaSize))) } : {}),
    };
  }
  return out;
}

/** Runs `fn` with a native list built from `items`, then destroys the list. */
export function withNativeList<T>(items: readonly TopicPartition[], fn: (list: Pointer) => T): T {
  const list = toNativeList(items);
  try {
    return fn(list);
  } finally {
    rdk().rd_kafka_topic_partition_list_destroy(list);
  }
}

// bun:ffi has readers but no writers; a view over the element's memory does the write.
function writeI64(p: Pointer, offset: number, value: bigint): void {
  new DataView(toArrayBuffer(p, offset, 8)).setBigInt64(0, value, true);
}

function writeU64(p: Pointer, offset: number, value: bigint): void {
  new DataView(toArrayBuffer(p, offset, 8)).setBigUint64(0, value, true);
}
