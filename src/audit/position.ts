/**
 * Where `audit --resume` goes on from: kept as the committed offsets of a group of its own
 * (`<KAFKA_GROUP_ID>-audit`), so that an hourly run reads the hour since the last one instead of the
 * whole retention. Two positions, in one commit at the end of a run:
 *   - each raw partition's: the end of the range the run audited (the workers' commit then);
 *   - each DLQ partition's: where the next run must start reading envelopes, and in the commit's
 *     metadata (`dlq_table_to`) the DLQ offset the DLQ table's check reached (dlq-table/audit.ts). An
 *     envelope of a record past the audited range can lie anywhere after the records the run
 *     audited were dead-lettered, even before the run's read ended (a batch that held the workers'
 *     commit back while later records were dead-lettered), so the start is the first envelope read
 *     of a record past the range, or the end of the read where there is none.
 * The group never joins: its commits are a simple consumer's, accepted for a group without members.
 */
import type { DlqPosition } from "../dlq/delivered.ts";
import type { Consumer } from "../kafka/consumer.ts";
import type { Range } from "./sources.ts";

export interface KeptPosition {
  /** Per raw partition, the offset the last run audited up to (exclusive). */
  raw: Map<number, number>;
  /** Per DLQ partition, where the next read of envelopes starts. */
  dlq: Map<number, number>;
  /** Per DLQ partition, the offset the DLQ table's check reached (exclusive). */
  dlqTable: Map<number, number>;
}

/** The commit metadata that carries the DLQ table check's end beside a DLQ partition's position. */
interface PositionMetadata {
  dlq_table_to?: number;
}

/** What the last `--resume` run kept; empty maps for a first run. */
export function readKeptPosition(
  group: Consumer,
  raw: { topic: string; partitions: number },
  dlq: { topic: string; partitions: number },
): KeptPosition {
  const tps = [
    ...Array.from({ length: raw.partitions }, (_, partition) => ({ topic: raw.topic, partition })),
    ...Array.from({ length: dlq.partitions }, (_, partition) => ({ topic: dlq.topic, partition })),
  ];
  const kept: KeptPosition = { raw: new Map(), dlq: new Map(), dlqTable: new Map() };
  for (const c of group.committed(tps)) {
    const offset = Number(c.offset ?? -1n);
    if (c.err || offset < 0) continue;
    (c.topic === raw.topic ? kept.raw : kept.dlq).set(c.partition, offset);
    const tableTo = c.topic === dlq.topic ? metadataOf(c.metadata).dlq_table_to : undefined;
    if (Number.isSafeInteger(tableTo) && tableTo! >= 0) kept.dlqTable.set(c.partition, tableTo!);
  }
  return kept;
}

/** Watches the envelopes a run reads and says where the next run's read of each DLQ partition starts. */
export class NextDlqStarts {
  readonly #ends = new Map<number, number>();
  readonly #first = new Map<number, number>();

  /** `ranges`: what this run audits; an envelope of a record at or past a range's end is the next run's. */
  constructor(ranges: readonly Range[]) {
    for (const r of ranges) this.#ends.set(r.partition, r.to);
  }

  seen(source: { partition: number; offset: number }, at: DlqPosition): void {
    const end = this.#ends.get(source.partition);
    if (end === undefined || source.offset < end) return;
    const first = this.#first.get(at.partition);
    if (first === undefined || at.offset < first) this.#first.set(at.partition, at.offset);
  }

  /** `readTo`: per DLQ partition, the offset after the last one read. */
  starts(readTo: ReadonlyMap<number, number>): Map<number, number> {
    const out = new Map<number, number>();
    for (const [p, next] of readTo) out.set(p, Math.min(next, this.#first.get(p) ?? next));
    return out;
  }
}

/** A commit's metadata as this module writes it; anything else reads as nothing kept. */
function metadataOf(text: string | undefined): PositionMetadata {
  try {
    const v: unknown = JSON.parse(text ?? "");
    return typeof v === "object" && v !== null ? (v as PositionMetadata) : {};
  } catch {
    return {};
  }
}

/**
 * Keeps the run's position for the next `--resume` run: one commit of both topics' offsets.
 * `dlqTable`: per DLQ partition, where the DLQ table's check reached (or the last run's, kept).
 */
export async function keepPosition(
  group: Consumer,
  rawTopic: string,
  ranges: readonly Range[],
  dlqTopic: string,
  dlqStarts: ReadonlyMap<number, number>,
  dlqTable: ReadonlyMap<number, number> = new Map(),
): Promise<void> {
  await group.commit([
    ...ranges.map((r) => ({ topic: rawTopic, partition: r.partition, offset: BigInt(r.to) })),
    ...[...dlqStarts].map(([partition, offset]) => {
      const tableTo = dlqTable.get(partition);
      const metadata: PositionMetadata = tableTo === undefined ? {} : { dlq_table_to: tableTo };
      return { topic: dlqTopic, partition, offset: BigInt(offset), metadata: JSON.stringify(metadata) };
    }),
  ]);
}
