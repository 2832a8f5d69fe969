/**
 * Runtime counters, updated per batch (not per record) by the worker and read by the stats server.
 *
 * Definitions:
 * - consumed: records handed to the worker by Kafka, but for those the replay check found the
 *   partition's last owner had delivered (replays_skipped).
 * - durable_clickhouse / durable_dlq: records whose destination acknowledged them.
 * - total_processed = durable_clickhouse + durable_dlq (records the worker is done with).
 * - in_flight: consumed − processed (buffered, being inserted, or awaiting DLQ acknowledgement).
 * The identity consumed = durable_clickhouse + durable_dlq + in_flight holds per partition.
 */
import { RAT_NAMES, type FailureReason } from "../cdr/fields.ts";

/**
 * Service types are vendor text of any length: the breakdown keeps at most this many distinct
 * values, each at most MAX_SERVICE_CHARS long, and counts every other row under "other".
 */
export const MAX_SERVICES = 64;
export const MAX_SERVICE_CHARS = 64;

/** The rows of a flushed batch, as the breakdowns need them. */
export interface RowsOrigin {
  partitions: ArrayLike<number>;
  rats: ArrayLike<number>;
  services: ArrayLike<string>;
  /** Kafka timestamps, ms since the epoch (-1: none). */
  timestamps?: ArrayLike<number>;
}

export interface PartitionCounters {
  partition: number;
  consumed: number;
  durableClickhouse: number;
  durableDlq: number;
  /** Records deleted by the broker before they were fetched (delivery/offsets/gaps.ts). */
  expired: number;
  /** Offsets librdkafka passed over: transaction markers, aborted transactions' records. */
  passedOver: number;
  /** Offsets never handed over, neither deleted nor passed over on purpose (gaps.ts): read again. */
  skipped: number;
  /** Records handed out again under the same assignment, dropped (delivery.ts handOver). */
  repeated: number;
}

/** A partition's counts before its first record. */
const NOTHING_YET = {
  consumed: 0, durableClickhouse: 0, durableDlq: 0, expired: 0, passedOver: 0, skipped: 0, repeated: 0,
} as const;

/** Records of a partition consumed and not yet durable. */
export function inFlightOf(pc: Pick<PartitionCounters, "consumed" | "durableClickhouse" | "durableDlq">): number {
  return pc.consumed - pc.durableClickhouse - pc.durableDlq;
}

const RAT_ENTRIES = Object.entries(RAT_NAMES).map(([code, name]) => [Number(code), name] as const);

export class Counters {
  readonly startedAt = Date.now();
  readonly partitions = new Map<number, PartitionCounters>();
  readonly byService = new Map<string, number>();
  readonly byRat: Record<string, number> = { "3G": 0, LTE_4G: 0, "5G_NR": 0 };
  readonly byDlqReason: Record<FailureReason, number> = {
    missing_required_field: 0,
    invalid_rat_value: 0,
    invalid_epoch: 0,
    malformed_json: 0,
    normalization_error: 0,
    ch_insert_failed: 0,
  };
  durableClickhouse = 0;
  durableDlq = 0;
  consumed = 0;
  flushes = 0;
  flushRows = 0;
  lastFlushAt: number | null = null;
  lastFlushMs = 0;
  chRetries = 0;
  /** Inserts that failed after they may have been stored, checked before their rows were sent again. */
  chAnswersLost = 0;
  chExhausted = 0;
  /** Rows ClickHouse refused alone (each sent to the DLQ by itself). */
  chRefusedRows = 0;
  /** Inserts made while isolating refused rows or splitting a batch ClickHouse refused whole. */
  chSplitInserts = 0;
  commits = 0;
  /** Records of owned partitions deleted by the broker before they were fetched (gaps.ts). */
  recordsExpired = 0;
  /** Offsets of owned partitions librdkafka passed over: transaction markers, aborted records (gaps.ts). */
  offsetsPassedOver = 0;
  /** Offsets of owned partitions skipped: never handed over, neither deleted nor passed over on purpose (gaps.ts). */
  offsetsSkipped = 0;
  /** Records librdkafka handed out again under the same assignment, dropped as already consumed. */
  recordsRepeated = 0;
  /** Commits the group refused while it rebalanced (sent again for partitions still owned). */
  commitsRefused = 0;
  /** DLQ producers made again after the coordinator timed a transaction out (exactly-once). */
  dlqProducerRenewals = 0;
  /** Assignments the group took away before they were released (lost revocations), and rows dropped with them. */
  assignmentsLost = 0;
  lostRowsDropped = 0;
  /** Gaps in the worker's own run longer than half the session (a freeze): sends waited for the group's verdict. */
  loopStalls = 0;
  lastCommitAt: number | null = null;
  /** Records skipped because the partition's last owner had delivered them (exactly-once). */
  replaysSkipped = 0;
  /** Replay checks answered, and failed attempts (each tried again). */
  replayChecks = 0;
  replayCheckFailures = 0;
  /** DLQ envelopes the replay check did not count: no valid MAC (DLQ_PROVENANCE_KEY set). */
  replayEnvelopesUnproven = 0;
  /** Proven envelopes whose offset held another payload: the record there was processed. */
  replayEnvelopesMismatched = 0;
  /** Histogram buckets (seconds) of flush latency and rows per batch. */
  readonly flushSeconds = new Histogram([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
  readonly batchRows = new Histogram([1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000]);
  /** Seconds from a record's Kafka timestamp to ClickHouse's acknowledgement of its insert. */
  readonly endToEndSeconds = new Histogram([0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800]);

  partition(p: number): PartitionCounters {
    let c = this.partitions.get(p);
    if (!c) {
      c = { partition: p, ...NOTHING_YET };
      this.partitions.set(p, c);
    }
    return c;
  }

  /** Counts `count` records as durable, partition by partition (looked up once per run of one partition). */
  addDurable(kind: "durableClickhouse" | "durableDlq", partitions: ArrayLike<number>, count: number): void {
    this[kind] += count;
    let pc: PartitionCounters | undefined;
    for (let i = 0; i < count; i++) {
      const p = partitions[i]!;
      if (pc?.partition !== p) pc = this.partition(p);
      pc[kind]++;
    }
  }

  /**
   * A flush that ClickHouse answered: inserted rows (all but `notInserted`, ascending) into the
   * breakdowns and histograms, the isolation's inserts and the batches that took the exhausted path.
   */
  recordFlush(
    rows: RowsOrigin & { count: number },
    outcome: { inserted: number; splitInserts: number; failed: unknown },
    notInserted: readonly number[],
    seconds: number,
  ): void {
    this.chSplitInserts += outcome.splitInserts;
    if (outcome.failed) this.chExhausted++;
    if (outcome.inserted === 0) return;
    this.flushes++;
    this.flushRows += outcome.inserted;
    this.lastFlushAt = Date.now();
    this.lastFlushMs = seconds * 1000;
    this.flushSeconds.observe(seconds);
    this.batchRows.observe(outcome.inserted);
    this.recordInserted(rows, rows.count, notInserted, Date.now());
  }

  /** Rows of a flushed batch the DLQ acknowledged: `refused` of them refused alone, the rest exhausted. */
  recordStoredInDlq(
    rows: RowsOrigin,
    indices: readonly number[],
    refused: number,
    exhaustedReason: FailureReason,
  ): void {
    if (indices.length === 0) return;
    this.addDurable(
      "durableDlq",
      indices.map((i) => rows.partitions[i]!),
      indices.length,
    );
    this.chRefusedRows += refused;
    this.byDlqReason.normalization_error += refused;
    this.byDlqReason[exhaustedReason] += indices.length - refused;
  }

  /** One rejected record the DLQ acknowledged. */
  recordRejected(partition: number, reason: FailureReason): void {
    this.addDurable("durableDlq", [partition], 1);
    this.byDlqReason[reason]++;
  }

  /**
   * Counts rows [0, count) of a batch as inserted, except the ones in `skip` (ascending row
   * indices, the refused and dead-lettered ones): durable per partition, by service, by RAT.
   */
  recordInserted(rows: RowsOrigin, count: number, skip: readonly number[] = [], now = Date.now()): void {
    let pc: PartitionCounters | undefined;
    let next = 0;
    const rats = this.#ratCounts;
    rats.fill(0);
    let inserted = 0;
    for (let i = 0; i < count; i++) {
      if (next < skip.length && skip[next] === i) {
        next++;
        continue;
      }
      const p = rows.partitions[i]!;
      if (pc?.partition !== p) pc = this.partition(p);
      pc.durableClickhouse++;
      rats[rows.rats[i]!]!++;
      this.#countService(rows.services[i]!);
      const ts = rows.timestamps?.[i] ?? -1;
      if (ts >= 0) this.endToEndSeconds.observe(Math.max(0, now - ts) / 1000);
      inserted++;
    }
    this.durableClickhouse += inserted;
    for (const [code, name] of RAT_ENTRIES) this.byRat[name]! += rats[code]!;
  }

  #countService(svc: string): void {
    const n = this.byService.get(svc);
    if (n !== undefined) this.byService.set(svc, n + 1);
    else if (this.byService.size < MAX_SERVICES && svc.length <= MAX_SERVICE_CHARS && svc !== "other")
      this.byService.set(svc, 1);
    else this.byService.set("other", (this.byService.get("other") ?? 0) + 1);
  }

  readonly #ratCounts = new Float64Array(256);

  /** A lost assignment: its records in flight will never be durable here (their next owner's). */
  forgetInFlight(): void {
    for (const pc of this.partitions.values()) {
      const n = inFlightOf(pc);
      pc.consumed -= n;
      this.consumed -= n;
    }
  }

  get totalProcessed(): number {
    return this.durableClickhouse + this.durableDlq;
  }

  get inFlight(): number {
    return this.consumed - this.totalProcessed;
  }
}

export class Histogram {
  readonly bounds: number[];
  /** Observations per bucket, not cumulative: an observation costs one search, not one add per bound. */
  readonly #perBucket: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: number[]) {
    this.bounds = bounds;
    this.#perBucket = new Float64Array(bounds.length);
  }

  /** Prometheus' cumulative counts: observations ≤ each bound. */
  get counts(): number[] {
    let acc = 0;
    return Array.from(this.#perBucket, (n) => (acc += n));
  }

  observe(v: number): void {
    this.sum += v;
    this.count++;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    if (i < b.length) this.#perBucket[i]!++;
  }
}
