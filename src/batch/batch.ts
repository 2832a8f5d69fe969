/**
 * One ClickHouse insert's worth of rows, in preallocated slots that are reused: a batch is reset
 * and refilled, never reallocated. Alongside each row it keeps what the DLQ would need if the
 * insert exhausted its retries (original payload, source partition and offset).
 */
import type { CdrRow } from "../cdr/decode.ts";
import { RowBuffer } from "../clickhouse/row-encoder.ts";
import type { Hold } from "../offsets/tracker.ts";

/** Distinct service types counted per batch before the rest fold into "other" (vendor input is unbounded). */
const MAX_SERVICES = 64;

export class Batch {
  readonly capacity: number;
  /** The rows as the TSV body of the insert. */
  readonly body = new RowBuffer();
  readonly payloads: string[];
  readonly partitions: Int32Array;
  readonly offsets: Float64Array;
  /** Holds of the offset tracker this batch owns; marked done when the batch is durable. */
  readonly holds: Hold[] = [];
  /** Rows per rat code (index 1, 6, 9). */
  readonly ratCounts = new Float64Array(10);
  readonly serviceCounts = new Map<string, number>();
  count = 0;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.payloads = new Array<string>(capacity);
    this.partitions = new Int32Array(capacity);
    this.offsets = new Float64Array(capacity);
  }

  get full(): boolean {
    return this.count >= this.capacity;
  }

  add(row: CdrRow, ingestedAt: number, payload: string, partition: number, offset: number): void {
    const i = this.count++;
    this.body.add(row, ingestedAt);
    const service = row.service_type;
    const rat = row.rat;
    this.payloads[i] = payload;
    this.partitions[i] = partition;
    this.offsets[i] = offset;
    this.ratCounts[rat]!++;
    const n = this.serviceCounts.get(service);
    if (n !== undefined) this.serviceCounts.set(service, n + 1);
    else if (this.serviceCounts.size < MAX_SERVICES) this.serviceCounts.set(service, 1);
    else this.serviceCounts.set("other", (this.serviceCounts.get("other") ?? 0) + 1);
  }

  reset(): void {
    // Drop string references so a reused slot does not pin old payloads.
    this.body.reset();
    this.payloads.fill(undefined as unknown as string, 0, this.count);
    this.count = 0;
    this.holds.length = 0;
    this.ratCounts.fill(0);
    this.serviceCounts.clear();
  }
}
