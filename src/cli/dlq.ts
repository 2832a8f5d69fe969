/** `dlq inspect` and `dlq replay`: what went to the DLQ, and sending it back after a fix. */
import { kafkaProps, type Config } from "../config.ts";
import { readDlq, type StoredEnvelope } from "../dlq/reader.ts";
import { CdrWorkerError } from "../errors.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { Producer } from "../kafka/producer.ts";
import { numberFlag, stringFlag, type ParsedArgs } from "./args.ts";

export const DLQ_HELP = `cdr-worker dlq inspect [--samples K]
  Reads KAFKA_TOPIC_DLQ from the beginning to its current end (commits nothing) and prints counts
  by failure_reason and by failed_field, plus K samples (default 3) per reason, as JSON.
cdr-worker dlq replay [--reason R] [--since ISO] [--until ISO] [--limit N] [--dry-run]
  Re-publishes the original payloads of matching DLQ records to KAFKA_TOPIC_RAW, byte for byte.
  Filters: failure_reason R, failed_at within [since, until). --dry-run only lists what it would send.`;

async function scan(cfg: Config, visit: (e: StoredEnvelope) => void): Promise<number> {
  const admin = new Admin(kafkaProps(cfg));
  const partitions = admin.partitionCounts([cfg.kafka.topicDlq]).get(cfg.kafka.topicDlq);
  admin.close();
  if (partitions == null) throw new CdrWorkerError("TOPOLOGY", `topic ${cfg.kafka.topicDlq} missing`);
  const consumer = new Consumer({
    props: kafkaProps(cfg, {
      "group.id": `cdr-worker-dlq-reader-${process.pid}-${Date.now()}`,
      "auto.offset.reset": "earliest",
    }),
    topics: [cfg.kafka.topicDlq],
    readHeaders: true,
  });
  let unreadable = 0;
  try {
    await readDlq(consumer, cfg.kafka.topicDlq, partitions, visit, () => unreadable++);
  } finally {
    await consumer.close();
  }
  return unreadable;
}

export async function dlqCommand(cfg: Config, sub: string | undefined, args: ParsedArgs): Promise<number> {
  if (sub === "inspect") {
    const samplesPer = numberFlag(args, "samples", 3, 0, 1000);
    const byReason: Record<string, number> = {};
    const byField: Record<string, number> = {};
    const samples: Record<string, unknown[]> = {};
    let total = 0;
    const unreadable = await scan(cfg, (e) => {
      total++;
      const r = e.envelope.failure_reason;
      byReason[r] = (byReason[r] ?? 0) + 1;
      const f = e.envelope.failed_field ?? "(none)";
      byField[f] = (byField[f] ?? 0) + 1;
      const list = (samples[r] ??= []);
      if (list.length < samplesPer) list.push({ ...e.envelope, source: e.headers });
    });
    console.log(
      JSON.stringify(
        { topic: cfg.kafka.topicDlq, total, unreadable, by_reason: byReason, by_field: byField, samples },
        null,
        1,
      ),
    );
    return 0;
  }
  if (sub === "replay") {
    const reason = stringFlag(args, "reason");
    const since = parseTime(args, "since");
    const until = parseTime(args, "until");
    const limit = numberFlag(args, "limit", Number.MAX_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER);
    const dryRun = args.flags.has("dry-run");
    const selected: StoredEnvelope[] = [];
    await scan(cfg, (e) => {
      if (selected.length >= limit) return;
      if (reason && e.envelope.failure_reason !== reason) return;
      const at = Date.parse(e.envelope.failed_at);
      if ((since !== null && at < since) || (until !== null && at >= until)) return;
      selected.push(e);
    });
    if (!dryRun && selected.length) {
      const producer = new Producer(kafkaProps(cfg));
      try {
        await producer.produceBatch(
          cfg.kafka.topicRaw,
          selected.map((e) => e.payloadText),
        );
      } finally {
        producer.close();
      }
    }
    console.log(
      JSON.stringify({
        dry_run: dryRun,
        to: cfg.kafka.topicRaw,
        [dryRun ? "would_send" : "sent"]: selected.length,
        records: dryRun
          ? selected.map((e) => ({
              dlq_offset: e.offset,
              failure_reason: e.envelope.failure_reason,
              failed_at: e.envelope.failed_at,
              payload: e.payloadText,
            }))
          : undefined,
      }),
    );
    return 0;
  }
  console.error(DLQ_HELP);
  return 2;
}

function parseTime(args: ParsedArgs, name: string): number | null {
  const v = stringFlag(args, name);
  if (v === undefined) return null;
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new CdrWorkerError("CONFIG_INVALID", `--${name}=${v}: expected an ISO 8601 time`);
  return t;
}
