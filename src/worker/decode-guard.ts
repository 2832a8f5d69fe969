/**
 * One record's verdict, whatever the record: the single pass (record-scan.ts) for the common valid
 * record, decode() for everything it declines. Both are total by design and fuzzed
 * (test/fuzz/fuzz.test.ts), but a defect in a stage must cost one record, not the partition: every
 * owner would read the same record and stop on it in turn, the whole group down.
 */
import { decode, decodeFailed, isOversized, oversized, undecodable } from "../cdr/decode.ts";
import type { DecodeContext, Verdict } from "../cdr/decode.ts";

export type { DecodeContext };
import { scanRecord } from "../cdr/record-scan.ts";
import type { Message } from "../kafka/message.ts";
import { LineLimit, log } from "../log.ts";

/** Said as an example, at most ten a minute: each such record has its envelope. */
const THREW_LINE = new LineLimit();

/** The stages, replaceable so a test can make one throw. */
export interface DecodeStages {
  scan: typeof scanRecord;
  decode: typeof decode;
}
const STAGES: DecodeStages = { scan: scanRecord, decode };

/**
 * The scanned row, else decode()'s verdict; undecodable() for a record librdkafka could not read,
 * oversized() for one over RECORD_MAX_BYTES (never scanned: the single pass would read it all).
 * A throw from either stage becomes a rejection.
 */
export function decodeOne(m: Message, ctx: DecodeContext, stages: DecodeStages = STAGES): Verdict {
  if (m.error !== undefined) return undecodable(m.error, m.errorText);
  try {
    if (isOversized(m.value, ctx, m.valueBytes)) return oversized(m.value!, ctx.recordMaxBytes!, m.valueBytes);
    const scanned = m.value === null ? null : stages.scan(m.value, ctx.phone);
    return scanned ?? stages.decode(m.value, ctx);
  } catch (e) {
    const fields = THREW_LINE.take({
      partition: m.partition,
      offset: m.offset,
      err: e instanceof Error ? e : new Error(String(e)),
    });
    if (fields) log.error("decoding a record threw; it goes to the DLQ and the worker goes on", fields);
    return decodeFailed(m.value, e);
  }
}
