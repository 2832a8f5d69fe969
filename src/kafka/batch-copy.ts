/**
 * Copying a fetched batch out of librdkafka in two native calls instead of ~10 per message, and its
 * headers when asked (names, values and their lengths into the same slab: per header through
 * bun:ffi, the DLQ's eight cost 10–11 µs a record against 4–5 here).
 *
 * Reading each rd_kafka_message_t field through bun:ffi, one memcpy call and one destroy call per
 * message cost ~1.6 µs a message: the consumer could not keep up with kcat. This is a small C
 * routine compiled at start by Bun's built-in TinyCC (`cc` from bun:ffi): no build step, no
 * compiler on the target, and it works inside the compiled binary. It calls librdkafka and libc
 * only through the function pointers bun:ffi already resolved, so TinyCC links nothing.
 *
 * Field offsets come from structs.ts (checked against the installed headers by a test), so this
 * file has no second copy of the struct layout. When TinyCC is unavailable (no writable temp dir,
 * another architecture), `loadBatchCopy()` returns null and the consumer keeps its per-message path,
 * which is also the reference the tests compare this one against.
 */
import { FFIType, ptr, type Pointer } from "bun:ffi";
import { log } from "../log.ts";
import { libc } from "./libc.ts";
import { rdk } from "./native.ts";
import { MESSAGE } from "./structs.ts";
import { compileC } from "./tinycc.ts";

/** Doubles per message in the metadata array filled by `copy`. */
export const META_STRIDE = 9;
/**
 * Slots of one message's metadata. A length of -1 means the value or key is null. The topic
 * handle is a pointer: user-space addresses on x86_64 have 47 bits, exact in a double, so no
 * BigInt is made per message.
 */
export const META = {
  err: 0,
  partition: 1,
  offset: 2,
  timestamp: 3,
  valueLen: 4,
  keyLen: 5,
  rkt: 6,
  /** The value's length before any cap (CopyCaps): the record's size. */
  valueWhole: 7,
  /** Headers copied after the key (with_headers): HEADER_FRAME bytes, the name, the value, each. */
  headerCount: 8,
} as const;

/**
 * Bytes before each header's name in the slab: its name's length (u32) and its value's (i32, -1
 * for a null value), little-endian as the machine writes them (x86_64).
 */
export const HEADER_FRAME = 8;

const SOURCE = `
typedef unsigned long size_t;
typedef long long i64;
typedef void *(*memcpy_t)(void *, const void *, size_t);
typedef void (*destroy_t)(void *);
typedef i64 (*timestamp_t)(void *, int *);
typedef int (*headers_t)(void *, void **);
typedef int (*header_get_all_t)(void *, size_t, const char **, const void **, size_t *);
typedef size_t (*strlen_t)(const char *);

#define AT(m, off, T) (*(T *)((char *)(m) + (off)))

/* Appends len bytes at p to slab (a NULL p stays null: *len_out keeps -1); returns the new end. */
static size_t put(memcpy_t mcpy, unsigned char *slab, size_t off, void *p, size_t len, double *len_out) {
  if (!p) return off;
  if (len) mcpy(slab + off, p, len);
  *len_out = (double)len;
  return off + len;
}

static size_t capped(size_t len, i64 cap) { return cap >= 0 && (i64)len > cap ? (size_t)cap : len; }

/* Bytes the headers of m take in the slab (HEADER_FRAME, name and value each); their count in *count. */
static i64 headers_size(void *m, void **fns, double *count) {
  void *hdrs = 0;
  const char *name; const void *value; size_t size;
  i64 total = 0;
  *count = 0;
  if (((headers_t)fns[3])(m, &hdrs) != 0) return 0;
  for (size_t i = 0; ((header_get_all_t)fns[4])(hdrs, i, &name, &value, &size) == 0; i++) {
    total += ${HEADER_FRAME} + (i64)((strlen_t)fns[5])(name) + (value ? (i64)size : 0);
    *count += 1;
  }
  return total;
}

/* Appends each header of m: its name's length, its value's (-1: null), the name, the value. */
static size_t put_headers(memcpy_t mcpy, unsigned char *slab, size_t off, void *m, void **fns) {
  void *hdrs = 0;
  const char *name; const void *value; size_t size;
  if (((headers_t)fns[3])(m, &hdrs) != 0) return off;
  for (size_t i = 0; ((header_get_all_t)fns[4])(hdrs, i, &name, &value, &size) == 0; i++) {
    unsigned int nlen = (unsigned int)((strlen_t)fns[5])(name);
    int vlen = value ? (int)size : -1;
    /* x86_64 stores unaligned words as they are. */
    *(unsigned int *)(slab + off) = nlen;
    *(int *)(slab + off + 4) = vlen;
    off += ${HEADER_FRAME};
    if (nlen) mcpy(slab + off, name, nlen);
    off += nlen;
    if (vlen > 0) mcpy(slab + off, value, (size_t)vlen);
    if (vlen > 0) off += (size_t)vlen;
  }
  return off;
}

/* Bytes needed to copy the payloads and keys of n messages, each at most its cap (-1: none), and
   their headers when asked; each message's topic handle into meta, so its name can be read while
   the message still lives. */
i64 batch_size(void **msgs, int n, double *meta, i64 value_cap, i64 key_cap, int with_headers, void **fns) {
  i64 total = 0;
  for (int i = 0; i < n; i++) {
    void *m = msgs[i];
    meta[i * ${META_STRIDE} + ${META.rkt}] = (double)(unsigned long)AT(m, ${MESSAGE.rkt}, void *);
    meta[i * ${META_STRIDE} + ${META.headerCount}] = 0;
    /* An error's payload is its text: copied whole, as a record error names its record's fate. */
    if (AT(m, ${MESSAGE.err}, int) != 0) {
      if (AT(m, ${MESSAGE.payload}, void *)) total += (i64)AT(m, ${MESSAGE.len}, size_t);
      continue;
    }
    if (AT(m, ${MESSAGE.payload}, void *)) total += (i64)capped(AT(m, ${MESSAGE.len}, size_t), value_cap);
    if (AT(m, ${MESSAGE.key}, void *)) total += (i64)capped(AT(m, ${MESSAGE.key_len}, size_t), key_cap);
    if (with_headers) total += headers_size(m, fns, meta + i * ${META_STRIDE} + ${META.headerCount});
  }
  return total;
}

/* Copies payload, key and (when asked) headers of each message into slab, fills meta (all but the
   header counts, which batch_size wrote), destroys every message. */
int batch_copy(void **msgs, int n, unsigned char *slab, double *meta, int with_ts, void **fns, i64 value_cap,
               i64 key_cap, int with_headers) {
  memcpy_t mcpy = (memcpy_t)fns[0];
  destroy_t destroy = (destroy_t)fns[1];
  timestamp_t timestamp = (timestamp_t)fns[2];
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    void *m = msgs[i];
    double *r = meta + i * ${META_STRIDE};
    int err = AT(m, ${MESSAGE.err}, int);
    r[${META.err}] = err;
    r[${META.partition}] = AT(m, ${MESSAGE.partition}, int);
    r[${META.offset}] = (double)AT(m, ${MESSAGE.offset}, i64);
    r[${META.rkt}] = (double)(unsigned long)AT(m, ${MESSAGE.rkt}, void *);
    r[${META.timestamp}] = -1;
    r[${META.valueLen}] = -1;
    r[${META.keyLen}] = -1;
    r[${META.valueWhole}] = (double)AT(m, ${MESSAGE.len}, size_t);
    if (err == 0 && with_ts) r[${META.timestamp}] = (double)timestamp(m, 0);
    size_t vlen = err == 0 ? capped(AT(m, ${MESSAGE.len}, size_t), value_cap) : AT(m, ${MESSAGE.len}, size_t);
    off = put(mcpy, slab, off, AT(m, ${MESSAGE.payload}, void *), vlen, r + ${META.valueLen});
    if (err == 0)
      off = put(mcpy, slab, off, AT(m, ${MESSAGE.key}, void *), capped(AT(m, ${MESSAGE.key_len}, size_t), key_cap),
                r + ${META.keyLen});
    if (err == 0 && with_headers) off = put_headers(mcpy, slab, off, m, fns);
    destroy(m);
  }
  return n;
}
`;

const SYMBOLS = {
  batch_size: { args: ["ptr", "i32", "ptr", "i64", "i64", "i32", "ptr"], returns: FFIType.i64_fast },
  batch_copy: { args: ["ptr", "i32", "ptr", "ptr", "i32", "ptr", "i64", "i64", "i32"], returns: "i32" },
} as const;

/**
 * Most bytes of each value and key copied out (-1: all); a value's whole length goes into meta.
 * `headers`: copy every header too (never capped), after the key.
 */
export interface CopyCaps {
  value: number;
  key: number;
  headers: boolean;
}

export interface BatchCopy {
  /**
   * Total payload + key (+ header) bytes, as capped, of the first n messages in the slot array;
   * topic handles and header counts into meta.
   */
  size(slots: Pointer, n: number, meta: Pointer, caps: CopyCaps): number;
  /** Copies into slab, fills meta (META_STRIDE doubles each), destroys all n messages. */
  copy(slots: Pointer, n: number, slab: Pointer, meta: Pointer, withTimestamps: boolean, caps: CopyCaps): void;
}

let loaded: BatchCopy | null | undefined;
// The function table the compiled code reads on every call: kept for the life of the process.
const keepAlive: unknown[] = [];

/** The compiled routine, or null (once logged) when it cannot be built here. */
export function loadBatchCopy(): BatchCopy | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  try {
    const compiled = compileC("batch-copy", SOURCE, SYMBOLS);
    const { symbols } = compiled;
    // Function pointers of the symbols bun:ffi already resolved: TinyCC needs to link nothing.
    const lib = rdk() as unknown as Record<string, { ptr: Pointer }>;
    const memcpy = libc.memcpy as unknown as { ptr: Pointer };
    // libc's strlen for header names: TinyCC compiles a byte loop without optimizing it.
    const strlen = libc.strlen as unknown as { ptr: Pointer };
    const table = new BigUint64Array([
      BigInt(memcpy.ptr),
      BigInt(lib.rd_kafka_message_destroy!.ptr),
      BigInt(lib.rd_kafka_message_timestamp!.ptr),
      BigInt(lib.rd_kafka_message_headers!.ptr),
      BigInt(lib.rd_kafka_header_get_all!.ptr),
      BigInt(strlen.ptr),
    ]);
    keepAlive.push(table);
    const tablePtr = ptr(table);
    loaded = {
      size: (slots, n, meta, caps) =>
        Number(symbols.batch_size(slots, n, meta, caps.value, caps.key, caps.headers ? 1 : 0, tablePtr)),
      copy: (slots, n, slab, meta, ts, caps) =>
        void symbols.batch_copy(slots, n, slab, meta, ts ? 1 : 0, tablePtr, caps.value, caps.key, caps.headers ? 1 : 0),
    };
  } catch (cause) {
    log.warn("kafka: native batch copy unavailable, copying per message", { cause: (cause as Error).message });
  }
  return loaded;
}
