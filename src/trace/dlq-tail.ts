/**
 * The DLQ topic's envelopes for one raw record that the DLQ table does not hold yet. The table
 * holds what `dlq fill` has committed; a worker without a filler, or a filler behind, leaves the
 * rest in the topic alone, and a record dead-lettered there is not a loss. So trace reads each DLQ
 * partition from the filler's committed offset (the whole partition where there is no table or no
 * commit) to its end, keeping the envelopes that name this source. With a provenance key only an
 * envelope whose MAC is right counts (provenance-mac.ts): the others are counted, never trusted.
 */
import type { RangeReader } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import { envelopeSource } from "../dlq/envelope.ts";
import type { ProvenanceKey } from "../dlq/provenance-mac.ts";
import { readDlq } from "../dlq/reader.ts";
import type { DeadLetteredRow } from "./verdict.ts";

export interface DlqTail {
  /** The first envelopes found (LISTED), as the DLQ table's rows would say them. */
  rows: DeadLetteredRow[];
  /** Every envelope found for the source, listed or not. */
  found: number;
  /** Envelopes naming the source without a valid MAC (forged, or from a worker without the key). */
  unproven: number;
  /** Envelopes read: the DLQ table's lag, as far as this read went. */
  read: number;
}

type Said = Pick<DeadLetteredRow, "failure_reason" | "failed_field" | "failed_at">;

/**
 * Envelopes listed, and characters kept of a text an envelope gives: anyone who may write to the
 * DLQ topic chooses how many name one source, and how long their fields are.
 */
const LISTED = 10;
const FIELD_CHARS = 256;

/** An envelope whose body does not read still names its source in its headers, but no reason. */
const UNREAD: Said = { failure_reason: "unreadable envelope", failed_field: null, failed_at: "" };

export async function deadLetteredInTail(
  reader: RangeReader,
  dlq: { topic: string; partitions: number; starts: ReadonlyMap<number, number> },
  source: { topic: string; partition: number; offset: number },
  key?: ProvenanceKey,
): Promise<DlqTail> {
  const out: DlqTail = { rows: [], found: 0, unproven: 0, read: 0 };
  const seen = (m: Message, at: { partition: number; offset: number }, said: Said) => {
    out.read++;
    const src = envelopeSource(m.headers);
    if (!src || src.topic !== source.topic) return;
    const { partition, offset } = src;
    if (partition !== source.partition || offset !== source.offset) return;
    // The whole envelope proven, or its source by an older form: either names the record.
    if (key && key.proves(src, m) === null) {
      out.unproven++;
      return;
    }
    if (out.found++ >= LISTED) return;
    const where = { dlq_partition: at.partition, dlq_offset: at.offset };
    const text = (v: string) => v.slice(0, FIELD_CHARS);
    const { failure_reason, failed_field, failed_at } = said;
    const fields = { failure_reason, failed_field: failed_field && text(failed_field), failed_at: text(failed_at) };
    out.rows.push({ ...where, ...fields, source_partition: partition, source_offset: offset });
  };
  await readDlq(
    reader,
    dlq.topic,
    dlq.partitions,
    { starts: dlq.starts },
    (e) => seen(e.message, e, e.envelope),
    (m) => seen(m, m, UNREAD),
  );
  return out;
}
