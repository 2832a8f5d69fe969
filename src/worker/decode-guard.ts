/**
 * One record's verdict, whatever the record. decode() is total by design and fuzzed
 * (test/cdr/fuzz.test.ts), but a defect in a stage must cost one record, not the partition: every
 * owner would read the same record and stop on it in turn, the whole group down.
 */
import { decode, decodeFailed, undecodable, type DecodeContext, type Decoded } from "../cdr/decode.ts";
import type { Message } from "../kafka/message.ts";
import { log } from "../log.ts";

/** decode(), or undecodable() for a record librdkafka could not read; a throw becomes a rejection. */
export function decodeOne(m: Message, ctx: DecodeContext, decoder: typeof decode = decode): Decoded {
  if (m.error !== undefined) return undecodable(m.error);
  try {
    return decoder(m.value, ctx);
  } catch (e) {
    log.error("decoding a record threw; it goes to the DLQ and the worker goes on", {
      partition: m.partition,
      offset: m.offset,
      err: e instanceof Error ? e : new Error(String(e)),
    });
    return decodeFailed(m.value, e);
  }
}
