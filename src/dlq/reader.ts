/**
 * Reads the DLQ topic back (for `dlq inspect` and `dlq replay`), streaming: each envelope is handed
 * to the caller as it is read and nothing is kept, so a DLQ of any length (7 days of retention) is
 * read in bounded memory. It reads an offset range of each partition, by default from the low
 * watermark to the high watermark seen at start, with partitions assigned directly (no group, no
 * rebalance, nothing committed), up to each partition's end as the fetcher reports it (the consumer
 * needs `enable.partition.eof=true`); it gives up only when no record arrives for IDLE_TIMEOUT_MS.
 */
import type { RangeReader } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import { FAILURE_REASONS } from "../cdr/fields.ts";
import { DLQ_STAGES, ENVELOPE_HEAD, envelopeTail, HEADERS, type DlqEnvelope, type DlqStage } from "./envelope.ts";
import { headerTexts } from "./header-text.ts";

export interface StoredEnvelope {
  partition: number;
  offset: number;
  envelope: DlqEnvelope;
  /** The vendor payload exactly as it was received (digits of big integers included). */
  payloadText: string;
  headers: Record<string, string>;
  stage: DlqStage;
  /** The record as it lies in the topic: what the MAC of the current form covers (provenance-mac.ts). */
  message: Message;
}

/** Offsets to read, the same for every partition: [from, to), each clamped to the watermarks. */
export interface OffsetRange {
  from?: number;
  to?: number;
  /** Where each partition starts instead of `from`; a partition it does not name is not read. */
  starts?: ReadonlyMap<number, number>;
  /** Asked after each record and while waiting: true ends the read there (a limit, a signal). */
  stop?: () => boolean;
  /**
   * Asks the partitions' watermarks. By default the reader's own call, which blocks (the tools);
   * the worker's replay check asks without blocking its event loop (Admin.listOffsets).
   */
  watermarks?: (partitions: readonly number[]) => Promise<Map<number, { low: number; high: number }>>;
}

export interface ReadProgress {
  read: number;
  total: number;
}

const decoder = new TextDecoder();
const IDLE_TIMEOUT_MS = 30_000;

/**
 * The original payload's text. Envelopes written by encodeEnvelope() put it first and the four
 * small fields after it, serialized the same way, so the text between is the payload verbatim.
 * Anything else falls back to re-serializing the parsed value, which recurses: null when the
 * payload nests too deep for that (JSON.parse took it; JSON.stringify overflows the stack).
 */
export function payloadTextOf(raw: string, env: DlqEnvelope): string | null {
  if (typeof env.original_payload === "string") return env.original_payload;
  const tail = envelopeTail(env.failure_reason, env.failed_field, env.failed_at, env.worker_instance);
  if (raw.startsWith(ENVELOPE_HEAD) && raw.endsWith(tail))
    return raw.slice(ENVELOPE_HEAD.length, raw.length - tail.length);
  try {
    return JSON.stringify(env.original_payload);
  } catch {
    return null;
  }
}

/**
 * The stage a record was turned away at, from its `dlq.error.stage` header; envelopes written
 * before that header existed are told apart by the attempts header (storage failures carry it) and
 * the detail ClickHouse's refusals start with.
 */
export function stageOf(headers: Record<string, string>): DlqStage {
  const stage = headers[HEADERS.stage] as DlqStage | undefined;
  if (stage && DLQ_STAGES.includes(stage)) return stage;
  if (headers[HEADERS.attempts] !== undefined) return "clickhouse-failed";
  if (headers[HEADERS.detail]?.startsWith("ClickHouse refused the row")) return "clickhouse-refused";
  return "decode";
}

/**
 * Reads the range of every partition, calling `onEnvelope` for each envelope in offset order per
 * partition (awaited when it returns a promise: a replay sends as it reads). Returns the next
 * offset of each partition, where a later run may resume (`--from-offset`).
 */
export async function readDlq(
  consumer: RangeReader,
  topic: string,
  partitions: number,
  range: OffsetRange,
  onEnvelope: (e: StoredEnvelope) => void | Promise<void>,
  onUnreadable: (m: Message, problem: string) => void,
  onProgress: (p: ReadProgress) => void = () => {},
): Promise<Map<number, number>> {
  const ends = new Map<number, number>();
  const next = new Map<number, number>();
  const assignment = [];
  let total = 0;
  const wanted = Array.from({ length: partitions }, (_, p) => p).filter((p) => !range.starts || range.starts.has(p));
  const marks = range.watermarks
    ? await range.watermarks(wanted)
    : new Map(wanted.map((p) => [p, consumer.queryWatermarks(topic, p)]));
  for (const p of wanted) {
    const from = range.starts ? range.starts.get(p) : range.from;
    const w = marks.get(p);
    if (!w) throw new Error(`reading ${topic}: no watermarks of partition ${p}`);
    const start = Math.max(w.low, from ?? w.low);
    const end = Math.min(w.high, range.to ?? w.high);
    next.set(p, Math.max(start, Math.min(end, w.high)));
    if (end <= start) continue;
    ends.set(p, end);
    total += end - start;
    assignment.push({ topic, partition: p, offset: BigInt(start) });
  }
  if (assignment.length === 0) return next;
  consumer.assign(assignment);
  const done = new Set<number>();
  let read = 0;
  let lastRecordAt = Date.now();
  // A partition is read once a record at or past its end arrives, or the fetcher reports the
  // partition's end at or past it: the last offsets may hold no record for this reader (a
  // transaction's marker, aborted records), so waiting for one at end − 1 could wait for ever.
  const reachedEnds = () => {
    for (const [p, end] of ends) if (!done.has(p) && (consumer.endReached(p) ?? -1) >= end) done.add(p);
  };
  while (done.size < ends.size && !range.stop?.()) {
    const batch = consumer.poll();
    if (batch.length === 0) {
      reachedEnds();
      if (done.size === ends.size) break;
      if (Date.now() - lastRecordAt > IDLE_TIMEOUT_MS)
        throw new Error(`reading ${topic}: no record for ${IDLE_TIMEOUT_MS / 1000} s with ${total - read} to go`);
      await Bun.sleep(5);
      continue;
    }
    lastRecordAt = Date.now();
    for (const m of batch) {
      // Records after a stop stay unread: `next` names the first of them.
      if (range.stop?.()) break;
      const end = ends.get(m.partition) ?? 0;
      if (m.offset >= end || done.has(m.partition)) continue;
      read++;
      next.set(m.partition, m.offset + 1);
      const envelope = readEnvelope(m);
      if (typeof envelope === "string") onUnreadable(m, envelope);
      else {
        const pending = onEnvelope(envelope);
        if (pending) await pending;
      }
      if (m.offset + 1 >= end) done.add(m.partition);
    }
    onProgress({ read, total });
  }
  return next;
}

const REASONS: ReadonlySet<string> = new Set(FAILURE_REASONS);

/**
 * The envelope a DLQ record holds, or what is wrong with it. Anyone who can write to the DLQ topic
 * can put anything there (`{}`, text, an envelope with a number for a payload): only a record of the
 * envelope's exact shape reaches a caller, so a replay never sends what is not a vendor payload.
 */
export function readEnvelope(m: Message): StoredEnvelope | string {
  const raw = m.value ? decoder.decode(m.value) : "";
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return "not JSON";
  }
  const problem = envelopeProblem(value);
  if (problem) return problem;
  const envelope = value as DlqEnvelope;
  const payloadText = payloadTextOf(raw, envelope);
  if (payloadText === null) return "original_payload nests too deep to be written out again";
  const headers = headerTexts(m.headers);
  return {
    partition: m.partition,
    offset: m.offset,
    envelope,
    payloadText,
    headers,
    stage: stageOf(headers),
    message: m,
  };
}

function envelopeProblem(v: unknown): string | null {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return "not a JSON object";
  const e = v as Record<string, unknown>;
  const payload = e.original_payload;
  if (typeof payload !== "string" && (payload === null || typeof payload !== "object" || Array.isArray(payload)))
    return "original_payload is neither an object nor a string";
  if (typeof e.failure_reason !== "string" || !REASONS.has(e.failure_reason))
    return "failure_reason is not a known reason";
  if (e.failed_field !== null && typeof e.failed_field !== "string") return "failed_field is neither a string nor null";
  if (typeof e.failed_at !== "string") return "failed_at is not a string";
  if (typeof e.worker_instance !== "string") return "worker_instance is not a string";
  return null;
}
