/**
 * One ClickHouse insert's worth of rows, in preallocated slots that are reused: a batch is reset
 * and refilled, never reallocated. Alongside each row it keeps where the row ends in the body (so
 * any run of rows can be inserted alone), what the DLQ needs if ClickHouse refuses it (original
 * payload, source partition and offset), and its rat code and service for the stats breakdowns.
 */
import type { CdrRow } from "../../cdr/row.ts";
import { asciiText, type ScannedRow } from "../../cdr/record-scan.ts";

/**
 * Where a batch writes each row as it arrives: the insert body, encoded once, at add time (the
 * worker gives clickhouse/row-binary.ts's RowBinaryBuffer; a batch does not know the storage format).
 */
export interface RowSink {
  /** Bytes written so far; `buf` holds them from 0. */
  readonly length: number;
  readonly buf: Uint8Array;
  add(row: CdrRow, ingestedAt: number, partition: number, offset: number): void;
  /** The same row bytes for a record the single pass read (record-scan.ts). */
  addScanned(row: ScannedRow, ingestedAt: number, partition: number, offset: number): void;
  reset(): void;
  /** The cdr_id of the row whose bytes start at `at` in `buf`, as text. */
  cdrIdAt(at: number): string;
}

export class Batch {
  readonly capacity: number;
  /** Bytes (body plus original payloads) at which the batch counts as full. */
  readonly maxBytes: number;
  /** The rows as the body of the insert. */
  readonly body: RowSink;
  /** Byte offset in `body` just past each row. */
  readonly rowEnds: Uint32Array;
  /**
   * Each record's payload: decode()'s text, or the fetched bytes of a scanned record (ASCII, so the
   * same characters), read as text only if ClickHouse refuses the row (payload()).
   */
  readonly payloads: Array<string | Uint8Array>;
  readonly partitions: Int32Array;
  readonly offsets: Float64Array;
  readonly rats: Uint8Array;
  /** Each record's Kafka timestamp (ms since the epoch; -1 when absent). */
  readonly timestamps: Float64Array;
  readonly services: string[];
  /** Each row's session_start_time (s): where ClickHouse's sorting key finds the row again. */
  readonly sessionStarts: Uint32Array;
  /**
   * 1 where the row's partition changed owner after it was read by the last one: its last owner may
   * have stored it past its commit with no trace in the offsets table (the view can fail after the
   * table's write), so it is looked up in the table before its first send (insert-once.ts).
   */
  readonly unsure: Uint8Array;
  count = 0;
  /** Characters of the payloads held (each also encoded into the body). */
  #payloadChars = 0;

  constructor(capacity: number, body: RowSink, maxBytes = Number.POSITIVE_INFINITY) {
    this.capacity = capacity;
    this.maxBytes = maxBytes;
    this.body = body;
    this.rowEnds = new Uint32Array(capacity);
    this.payloads = new Array<string | Uint8Array>(capacity);
    this.partitions = new Int32Array(capacity);
    this.offsets = new Float64Array(capacity);
    this.rats = new Uint8Array(capacity);
    this.timestamps = new Float64Array(capacity);
    this.services = new Array<string>(capacity);
    this.sessionStarts = new Uint32Array(capacity);
    this.unsure = new Uint8Array(capacity);
  }

  /** Memory the rows hold: the encoded body and the payload strings. */
  get bytes(): number {
    return this.body.length + this.#payloadChars;
  }

  /** Full by rows, or by bytes: large records seal a batch long before BATCH_SIZE. */
  get full(): boolean {
    return this.count >= this.capacity || this.bytes >= this.maxBytes;
  }

  add(row: CdrRow, ingestedAt: number, payload: string, partition: number, offset: number, timestamp = -1): void {
    this.body.add(row, ingestedAt, partition, offset);
    this.#keep(payload, partition, offset, timestamp, row.rat, row.service_type, row.session_start_time);
  }

  /** A record the single pass read: its row written from the payload's bytes, the bytes kept. */
  addScanned(row: ScannedRow, ingestedAt: number, partition: number, offset: number, timestamp = -1): void {
    this.body.addScanned(row, ingestedAt, partition, offset);
    // A view of the poll's copy; a large record is copied so that it alone does not keep the
    // poll's other records' bytes alive after they have gone.
    const payload = row.bytes.length > VIEW_MAX_BYTES ? row.bytes.slice() : row.bytes;
    this.#keep(payload, partition, offset, timestamp, row.rat, row.service, row.sessionStart);
  }

  /** What the batch keeps beside the row just written into the body. */
  #keep(
    payload: string | Uint8Array,
    partition: number,
    offset: number,
    timestamp: number,
    rat: number,
    service: string,
    sessionStart: number,
  ): void {
    const i = this.count++;
    this.rowEnds[i] = this.body.length;
    this.payloads[i] = payload;
    this.#payloadChars += payload.length;
    this.partitions[i] = partition;
    this.offsets[i] = offset;
    this.rats[i] = rat;
    this.timestamps[i] = timestamp;
    this.services[i] = service;
    this.sessionStarts[i] = sessionStart;
  }

  /** Row i's original payload as text. */
  payload(i: number): string {
    const p = this.payloads[i]!;
    return typeof p === "string" ? p : asciiText(p, 0, p.length);
  }

  /** The insert body of rows [lo, hi) (a view: valid until the batch is reset). */
  rows(lo: number, hi: number): Uint8Array {
    return this.body.buf.subarray(lo === 0 ? 0 : this.rowEnds[lo - 1]!, this.rowEnds[hi - 1]!);
  }

  /** Row i's cdr_id, read back from its body: what a lookup of stored rows matches it by. */
  cdrId(i: number): string {
    return this.body.cdrIdAt(i === 0 ? 0 : this.rowEnds[i - 1]!);
  }

  reset(): void {
    // Drop string references so a reused slot does not pin old payloads.
    this.body.reset();
    this.payloads.fill(undefined as unknown as string, 0, this.count);
    this.unsure.fill(0, 0, this.count);
    this.services.fill(undefined as unknown as string, 0, this.count);
    this.count = 0;
    this.#payloadChars = 0;
  }
}

/** Largest scanned payload a batch keeps as a view of the fetched bytes rather than a copy. */
const VIEW_MAX_BYTES = 2048;
