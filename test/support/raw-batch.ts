/**
 * Bytes no client library writes: Kafka v2 record batches built field by field (any length, any
 * varint, CRC32C, an lz4 frame), sent with a raw ProduceRequest. The broker keeps what its own
 * reader accepts, and librdkafka's mock cluster keeps anything: so a test can put on a partition a
 * record that the consumer must read, or must give up on at that offset and move past.
 */
import { connect } from "node:net";

/** One record's fields as they go on the wire; the lengths default to the bytes' own. */
export interface RawRecord {
  key?: Uint8Array | null;
  value?: Uint8Array | null;
  /** Written in place of the key's length: -1 is null, below -1 is what no client writes. */
  keyLength?: number;
  valueLength?: number;
  /** Written in place of the record's own length varint. */
  recordLength?: number;
  /** Bytes written instead of the whole record (after its length, unless `recordLength` is given). */
  raw?: Uint8Array;
  /**
   * Its offset delta in the batch, its index unless given: offsets left out between records are
   * what compaction leaves, or a skip (no record, no marker) as the consumer sees it.
   */
  offsetDelta?: number;
}

export type Codec = "none" | "lz4";

const CODEC_BITS: Record<Codec, number> = { none: 0, lz4: 3 };

function zigzag(n: bigint): bigint {
  return n >= 0n ? n << 1n : (-n << 1n) - 1n;
}

/** A signed varint (zigzag), as Kafka writes record fields. */
export function varint(n: number | bigint): Uint8Array {
  let v = zigzag(BigInt(n));
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Uint8Array.from(out);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function recordBytes(r: RawRecord, delta: number): Uint8Array {
  const body =
    r.raw ??
    concat([
      Uint8Array.of(0), // attributes
      varint(0), // timestamp delta
      varint(delta),
      varint(r.keyLength ?? (r.key == null ? -1 : r.key.length)),
      r.key ?? new Uint8Array(),
      varint(r.valueLength ?? (r.value == null ? -1 : r.value.length)),
      r.value ?? new Uint8Array(),
      varint(0), // headers
    ]);
  return concat([varint(r.recordLength ?? body.length), body]);
}

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

/** CRC32C (Castagnoli), the checksum of a v2 record batch. */
export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC32C_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * An lz4 frame of the records, in stored blocks (a block whose size has the high bit set holds its
 * bytes uncompressed): every lz4 reader takes it, and no compressor is needed. `corrupt` gives a
 * block that claims compression and holds garbage, which no reader can decompress.
 */
export function lz4Frame(data: Uint8Array, opts: { corrupt?: boolean } = {}): Uint8Array {
  // FLG: version 01, independent blocks; BD: 4 MiB blocks. The header checksum is the second byte
  // of the descriptor's xxHash32.
  const descriptor = Uint8Array.of(0x60, 0x70);
  const hc = (Bun.hash.xxHash32(descriptor, 0) >>> 8) & 0xff;
  const header = concat([Uint8Array.of(0x04, 0x22, 0x4d, 0x18), descriptor, Uint8Array.of(hc)]);
  const size = new DataView(new ArrayBuffer(4));
  const body = opts.corrupt ? new Uint8Array(data.length).fill(0xff) : data;
  size.setUint32(0, (body.length | (opts.corrupt ? 0 : 0x80000000)) >>> 0, true);
  return concat([header, new Uint8Array(size.buffer), body, new Uint8Array(4)]);
}

/**
 * A v2 record batch of `records`, offsets from 0, in `codec`. `magic`: the version byte written (2
 * unless given); librdkafka passes over a batch of a version it does not know.
 */
export function recordBatch(records: RawRecord[], codec: Codec = "none", opts: { corruptFrame?: boolean; magic?: number } = {}): Uint8Array {
  const plain = concat(records.map((r, i) => recordBytes(r, r.offsetDelta ?? i)));
  const payload = codec === "lz4" ? lz4Frame(plain, { corrupt: opts.corruptFrame }) : plain;
  const now = BigInt(Date.now());
  // From attributes to the end: what the CRC covers.
  const tail = new DataView(new ArrayBuffer(2 + 4 + 8 + 8 + 8 + 2 + 4 + 4));
  tail.setInt16(0, CODEC_BITS[codec]);
  tail.setInt32(2, records.length === 0 ? -1 : (records.at(-1)!.offsetDelta ?? records.length - 1)); // last offset delta
  tail.setBigInt64(6, now); // base timestamp
  tail.setBigInt64(14, now); // max timestamp
  tail.setBigInt64(22, -1n); // producer id
  tail.setInt16(30, -1); // producer epoch
  tail.setInt32(32, -1); // base sequence
  tail.setInt32(36, records.length);
  const covered = concat([new Uint8Array(tail.buffer), payload]);
  const head = new DataView(new ArrayBuffer(8 + 4 + 4 + 1 + 4));
  head.setBigInt64(0, 0n); // base offset: the broker assigns it
  head.setInt32(8, 4 + 1 + 4 + covered.length); // batch length, after this field
  head.setInt32(12, -1); // partition leader epoch
  head.setInt8(16, opts.magic ?? 2); // magic
  head.setUint32(17, crc32c(covered));
  return concat([new Uint8Array(head.buffer), covered]);
}

function str(s: string): Uint8Array {
  const b = new TextEncoder().encode(s);
  const out = new Uint8Array(2 + b.length);
  new DataView(out.buffer).setInt16(0, b.length);
  out.set(b, 2);
  return out;
}

/**
 * Sends `batch` to `topic`/`partition` at `broker` (host:port, the partition's leader) in a
 * ProduceRequest v3 (acks all) and returns the partition's error code and the batch's base offset.
 */
export async function produceRaw(broker: string, topic: string, partition: number, batch: Uint8Array): Promise<{ error: number; baseOffset: bigint }> {
  const fixed = (n: number, f: (v: DataView) => void) => {
    const b = new Uint8Array(n);
    f(new DataView(b.buffer));
    return b;
  };
  const body = concat([
    fixed(8, (v) => { v.setInt16(0, 0); v.setInt16(2, 3); v.setInt32(4, 1); }), // Produce, v3, correlation id 1
    str("raw-batch-test"),
    fixed(2 + 2 + 4 + 4, (v) => { v.setInt16(0, -1); v.setInt16(2, -1); v.setInt32(4, 10_000); v.setInt32(8, 1); }),
    str(topic),
    fixed(4 + 4 + 4, (v) => { v.setInt32(0, 1); v.setInt32(4, partition); v.setInt32(8, batch.length); }),
    batch,
  ]);
  const request = concat([fixed(4, (v) => v.setInt32(0, body.length)), body]);
  const [host, port] = [broker.slice(0, broker.lastIndexOf(":")), Number(broker.slice(broker.lastIndexOf(":") + 1))];
  const answer = await new Promise<Uint8Array>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host, port }, () => socket.write(request));
    socket.setTimeout(15_000, () => socket.destroy(new Error(`no ProduceResponse from ${broker} in 15 s`)));
    socket.on("data", (d: Buffer) => {
      chunks.push(d);
      const all = Buffer.concat(chunks);
      if (all.length >= 4 && all.length >= 4 + all.readInt32BE(0)) {
        socket.end();
        resolve(new Uint8Array(all.subarray(4, 4 + all.readInt32BE(0))));
      }
    });
    socket.on("error", reject);
  });
  // correlation id, [topic: name, [partition: index, error, base offset, log append time]], throttle
  const v = new DataView(answer.buffer, answer.byteOffset, answer.byteLength);
  let o = 4 + 4; // correlation id, topics count (1)
  o += 2 + v.getInt16(o); // topic name
  o += 4 + 4; // partitions count (1), partition index
  return { error: v.getInt16(o), baseOffset: v.getBigInt64(o + 2) };
}
