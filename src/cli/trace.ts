/**
 * `cdr-worker trace`: where is record X? Given a raw_id, or a partition and offset of the raw topic,
 * it looks in the offsets table and the table (stored), the DLQ table (dead-lettered), and at the
 * partition's positions (not yet consumed, gone), and prints one JSON line: the verdict
 * (trace/verdict.ts), a line that says it, and what it found. The SQL and the watermark reads an
 * operator would otherwise write by hand.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { tableExists } from "../dlq-table/audit.ts";
import { recordOffsets } from "../audit/sources.ts";
import { answeringClient } from "../clickhouse/client.ts";
import { LIST_ANSWER_BYTES, queryText } from "../clickhouse/answer.ts";
import { dlqTable, offsetsTable } from "../clickhouse/migrate.ts";
import { log } from "../log.ts";
import { accessRefused } from "../clickhouse/grants.ts";
import { provenanceKeyOf } from "./provenance-key.ts";
import type { Config } from "../config.ts";
import { CdrWorkerError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { deadLetteredInTail } from "../trace/dlq-tail.ts";
import { offsetVerdict, rawIdVerdict, type DeadLetteredRow, type Positions, type StoredRow } from "../trace/verdict.ts";
import { numberFlag, type ParsedArgs } from "./args.ts";
import { clientProps } from "./kafka-clients.ts";

export const TRACE_HELP = `cdr-worker trace <raw_id> | --partition P --offset O
  Where is a record of KAFKA_TOPIC_RAW? Prints one JSON line: its verdict, a line that says it, and
  what was found. stored: its row (the offsets table and the table); dead_lettered: its DLQ offset,
  reason and field (the DLQ table, which \`dlq fill\` fills); stored_and_dead_lettered. Given a
  partition and offset, also: not_yet_consumed (at or past the group's commit, with the records
  waiting), not_yet_written, gone (below the partition's log start: deleted by the broker before it
  was stored), not_a_record (a transaction marker or an aborted record), missing (committed, and
  neither stored nor dead-lettered: a loss; \`audit\` confirms it). Before it says missing it reads
  the DLQ topic past what \`dlq fill\` has put in the DLQ table (all of it, with no table). A raw_id
  found nowhere is found_nowhere, with the group's positions. A raw_id is looked up by its cdr_id,
  which the table's sorting key does not lead with: that read scans the table. Exit 1 on missing,
  else 0.`;

export async function traceCommand(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const rawId = args.positionals[1];
  const byOffset = args.flags.has("partition") || args.flags.has("offset");
  if ((rawId === undefined) === !byOffset)
    throw new CdrWorkerError("CONFIG_INVALID", "trace takes a raw_id, or --partition and --offset, not both");
  const topic = cfg.kafka.topicRaw;
  const partitions = partitionCount(cfg, topic);
  const ch = await answeringClient(cfg.clickhouse);
  const group = new Consumer({ props: clientProps(cfg, "auditGroup"), topics: [] });
  try {
    const positions = positionsOf(group, topic, partitions);
    if (rawId !== undefined) {
      const cdrId = Bun.randomUUIDv5(rawId, "dns");
      const stored = await storedById(cfg, ch, cdrId);
      const dead = await deadLettered(cfg, ch, `raw_id = ${quote(rawId)}`);
      const v = rawIdVerdict(rawId, stored, dead, positions);
      print({ raw_id: rawId, cdr_id: cdrId, ...v, stored, dead_lettered: dead, positions });
      return "OK";
    }
    const partition = numberFlag(args, "partition", 0, 0, partitions - 1);
    const offset = numberFlag(args, "offset", 0, 0, Number.MAX_SAFE_INTEGER);
    if (!Number.isInteger(partition) || !Number.isInteger(offset))
      throw new CdrWorkerError("CONFIG_INVALID", "--partition and --offset take whole numbers");
    const p = positions[partition]!;
    const stored = await storedAt(cfg, ch, partition, offset);
    const where = `source_topic = ${quote(topic)} AND source_partition = ${partition} AND source_offset = ${offset}`;
    let dead = await deadLettered(cfg, ch, where);
    const readable = offset >= p.low && offset < p.high ? await recordAt(cfg, topic, partition, offset) : null;
    // Committed and found in neither table: the DLQ topic past the DLQ table's reach says whether
    // it was dead-lettered before a loss is said.
    const tail = stored.length === 0 && dead.length === 0 && readable && offset < p.committed
      ? await dlqTail(cfg, ch, { topic, partition, offset })
      : null;
    if (tail) dead = tail.rows;
    const fromDlqTopic = tail !== null;
    const v = offsetVerdict({ offset, positions: p, stored, deadLettered: dead, readable, fromDlqTopic });
    const read = tail && { envelopes_read: tail.read, found: tail.found, unproven: tail.unproven };
    const dlqTopic = read ? { dlq_topic: read } : {};
    print({ partition, offset, ...v, stored, dead_lettered: dead, ...dlqTopic, position: p });
    return v.verdict === "missing" ? "TRACE_MISSING" : "OK";
  } finally {
    await group.close();
    await ch.close();
  }
}

function print(line: Record<string, unknown>): void {
  console.log(JSON.stringify(line));
}

function partitionCount(cfg: Config, topic: string): number {
  const admin = new Admin(clientProps(cfg, "admin"));
  try {
    const n = admin.partitionCounts([topic]).get(topic);
    if (n == null) throw new CdrWorkerError("TOPOLOGY", `topic ${topic} missing`);
    return n;
  } finally {
    admin.close();
  }
}

function positionsOf(group: Consumer, topic: string, partitions: number): Positions[] {
  const tps = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
  const committed = new Map(group.committed(tps).map((c) => [c.partition, Number(c.offset)]));
  return tps.map(({ partition }) => {
    const { low, high } = group.queryWatermarks(topic, partition);
    return { partition, low, high, committed: committed.get(partition) ?? -1 };
  });
}

/** The offsets table's row at this partition and offset: a point read of its sorting key. */
async function storedAt(cfg: Config, ch: ClickHouseClient, partition: number, offset: number): Promise<StoredRow[]> {
  const table = `${cfg.clickhouse.database}.${offsetsTable(cfg.clickhouse.table)}`;
  return rows<StoredRow>(
    ch,
    `SELECT kafka_partition AS partition, kafka_offset AS offset, toString(cdr_id) AS id, ` +
      `toString(ingested_at) AS ingested_at FROM ${table} ` +
      `WHERE kafka_partition = ${partition} AND kafka_offset = ${offset} ORDER BY ingested_at`,
  );
}

/** The table's rows of this cdr_id, with the offsets they were stored from. */
async function storedById(cfg: Config, ch: ClickHouseClient, cdrId: string): Promise<StoredRow[]> {
  const table = `${cfg.clickhouse.database}.${cfg.clickhouse.table}`;
  return rows<StoredRow>(
    ch,
    `SELECT kafka_partition AS partition, kafka_offset AS offset, toString(cdr_id) AS id, ` +
      `toString(ingested_at) AS ingested_at FROM ${table} WHERE cdr_id IN (toUUID(${quote(cdrId)})) ` +
      `ORDER BY ingested_at`,
  );
}

/**
 * Whether the DLQ table can be read: it exists, and this user may read it. It is the DLQ table's own
 * role's (grants.ts): run as the worker's user, trace reads the DLQ topic instead, from its start,
 * and says so once.
 */
async function dlqTableReadable(cfg: Config, ch: ClickHouseClient): Promise<boolean> {
  const table = `${cfg.clickhouse.database}.${dlqTable(cfg.clickhouse.table)}`;
  return tableExists(ch, table).catch((e: unknown) => {
    const code = accessRefused(e);
    if (code === null) throw e;
    if (!refusalSaid)
      log.warn(`ClickHouse user ${cfg.clickhouse.user} may not read ${table}: the DLQ topic is read instead`, { code });
    refusalSaid = true;
    return false;
  });
}
let refusalSaid = false;

/** The DLQ table's rows matching `where`; none where `dlq fill` has made no table, or it cannot be read. */
async function deadLettered(cfg: Config, ch: ClickHouseClient, where: string): Promise<DeadLetteredRow[]> {
  const table = `${cfg.clickhouse.database}.${dlqTable(cfg.clickhouse.table)}`;
  if (!(await dlqTableReadable(cfg, ch))) return [];
  return rows<DeadLetteredRow>(
    ch,
    `SELECT dlq_partition, dlq_offset, failure_reason, failed_field, toString(failed_at) AS failed_at, ` +
      `source_partition, source_offset FROM ${table} WHERE ${where} ORDER BY dlq_partition, dlq_offset`,
  );
}

/** The DLQ topic's envelopes of this source past what `dlq fill` has committed to the DLQ table. */
async function dlqTail(cfg: Config, ch: ClickHouseClient, source: Source) {
  const topic = cfg.kafka.topicDlq;
  const partitions = partitionCount(cfg, topic);
  // Where the table cannot be read, the filler's commits say nothing of what it holds: all of the topic.
  const filled = await dlqTableReadable(cfg, ch);
  const group = new Consumer({ props: clientProps(cfg, "dlqFiller"), topics: [] });
  const props = clientProps(cfg, "auditReader", `trace-dlq-${process.pid}`);
  const reader = new Consumer({ props, topics: [], readHeaders: true });
  try {
    const tps = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
    const committed = filled ? group.committed(tps) : [];
    const starts = new Map(tps.map(({ partition }) => [partition, 0]));
    for (const c of committed) starts.set(c.partition, Math.max(0, Number(c.offset ?? -1n)));
    return await deadLetteredInTail(reader, { topic, partitions, starts }, source, provenanceKeyOf(cfg));
  } finally {
    await Promise.all([group.close(), reader.close()]);
  }
}

type Source = { topic: string; partition: number; offset: number };

/** Whether a read_committed reader finds a record at the offset: a marker or an aborted record is none. */
async function recordAt(cfg: Config, topic: string, partition: number, offset: number): Promise<boolean> {
  const reader = new Consumer({ props: clientProps(cfg, "auditReader", `trace-${process.pid}`), topics: [] });
  try {
    const one = { partition, from: offset, to: offset + 1 };
    for await (const o of recordOffsets(reader, topic, one)) return o === offset;
    return false;
  } finally {
    await reader.close();
  }
}

async function rows<T>(ch: ClickHouseClient, query: string): Promise<T[]> {
  const text = await queryText(ch, query, LIST_ANSWER_BYTES, { format: "JSONEachRow" });
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const r = JSON.parse(line) as Record<string, unknown>;
      // 18.16 writes Int64 as strings in JSON, current releases as numbers: one form here.
      for (const k of ["partition", "offset", "dlq_partition", "dlq_offset", "source_partition", "source_offset"])
        if (k in r) r[k] = Number(r[k]);
      // Selected as `id`: an alias named as the column would stand for it in WHERE (a String, not a UUID).
      if ("id" in r) {
        r.cdr_id = r.id;
        delete r.id;
      }
      return r as T;
    });
}

/** A string literal for both supported servers: backslash and quote escaped. */
function quote(s: string): string {
  return `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}
