/** Reads the DLQ topic back (for `dlq inspect` and `dlq replay`): envelopes up to the high watermark. */
import type { Consumer } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import { ENVELOPE_HEAD, envelopeTail, type DlqEnvelope } from "./envelope.ts";

export interface StoredEnvelope {
  partition: number;
  offset: number;
  envelope: DlqEnvelope;
  /** The vendor payload exactly as it was received (digits of big integers included). */
  payloadText: string;
  headers: Record<string, string>;
}

const decoder = new TextDecoder();

/**
 * The original payload's text. Envelopes written by encodeEnvelope() put it first and the four
 * small fields after it, serialized the same way, so the text between is the payload verbatim.
 * Anything else falls back to re-serializing the parsed value.
 */
export function payloadTextOf(raw: string, env: DlqEnvelope): string {
  if (typeof env.original_payload === "string") return env.original_payload;
  const tail = envelopeTail(env.failure_reason, env.failed_field, env.failed_at, env.worker_instance);
  if (raw.startsWith(ENVELOPE_HEAD) && raw.endsWith(tail))
    return raw.slice(ENVELOPE_HEAD.length, raw.length - tail.length);
  return JSON.stringify(env.original_payload);
}

/** Reads every DLQ message present now (up to the high watermark of each partition). */
export async function readDlq(
  consumer: Consumer,
  topic: string,
  partitions: number,
  onEnvelope: (e: StoredEnvelope) => void,
  onUnreadable: (m: Message) => void,
): Promise<void> {
  const ends = new Map<number, number>();
  for (let p = 0; p < partitions; p++) {
    const w = consumer.queryWatermarks(topic, p);
    if (w.high > w.low) ends.set(p, w.high);
  }
  const done = new Set<number>();
  const deadline = Date.now() + 120_000;
  while (done.size < ends.size) {
    if (Date.now() > deadline) throw new Error(`reading ${topic} timed out`);
    const batch = consumer.poll();
    if (batch.length === 0) {
      await Bun.sleep(5);
      continue;
    }
    for (const m of batch) {
      const raw = m.value ? decoder.decode(m.value) : "";
      try {
        const envelope = JSON.parse(raw) as DlqEnvelope;
        const headers = Object.fromEntries((m.headers ?? []).map(([k, v]) => [k, decoder.decode(v)]));
        onEnvelope({
          partition: m.partition,
          offset: m.offset,
          envelope,
          payloadText: payloadTextOf(raw, envelope),
          headers,
        });
      } catch {
        onUnreadable(m);
      }
      if (m.offset + 1 >= (ends.get(m.partition) ?? 0)) done.add(m.partition);
    }
  }
}
