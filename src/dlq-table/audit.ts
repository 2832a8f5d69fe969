/**
 * The DLQ table's audit: the DLQ topic's committed records (read_committed) against the table's
 * rows, per DLQ partition, over what the filler says it has done: from the low watermark to its
 * group's committed offset. Every such record is one row: none missing, none stored twice, and no
 * row at an offset the topic has no committed record at (an aborted envelope).
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { LIST_ANSWER_BYTES, queryText, ROWS_ANSWER_BYTES } from "../clickhouse/answer.ts";
import type { Consumer } from "../kafka/consumer.ts";
import { recordOffsets, type Range } from "../audit/sources.ts";

export interface DlqTableFindings {
  dlq_table: string;
  /** Each audited partition's [from, to): the filler's committed offset is `to`. */
  ranges: Range[];
  envelopes: number;
  rows: number;
  missing: number;
  stored_twice: number;
  not_in_topic: number;
  /** The first offsets of each finding, `partition:offset`. */
  first: { missing: string[]; stored_twice: string[]; not_in_topic: string[] };
}

const LISTED = 10;

export async function auditDlqTable(
  ch: ClickHouseClient,
  table: string,
  reader: Consumer,
  topic: string,
  ranges: readonly Range[],
): Promise<DlqTableFindings> {
  const f: DlqTableFindings = {
    dlq_table: table,
    ranges: [...ranges],
    envelopes: 0,
    rows: 0,
    missing: 0,
    stored_twice: 0,
    not_in_topic: 0,
    first: { missing: [], stored_twice: [], not_in_topic: [] },
  };
  const note = (kind: keyof DlqTableFindings["first"], p: number, o: number) => {
    f[kind]++;
    if (f.first[kind].length < LISTED) f.first[kind].push(`${p}:${o}`);
  };
  for (const r of ranges) {
    if (r.to <= r.from) continue;
    const query =
      `SELECT dlq_offset, count() FROM ${table} WHERE dlq_partition = ${r.partition} ` +
      `AND dlq_offset >= ${r.from} AND dlq_offset < ${r.to} GROUP BY dlq_offset`;
    const counts = new Map<number, number>();
    for (const line of (await queryText(ch, query, ROWS_ANSWER_BYTES)).split("\n").filter(Boolean)) {
      const [o, c] = line.split("\t").map(Number) as [number, number];
      counts.set(o, c);
      f.rows += c;
      if (c > 1) note("stored_twice", r.partition, o);
    }
    for await (const o of recordOffsets(reader, topic, r)) {
      f.envelopes++;
      if (!counts.has(o)) note("missing", r.partition, o);
      counts.delete(o);
    }
    for (const o of [...counts.keys()].sort((a, b) => a - b)) note("not_in_topic", r.partition, o);
  }
  return f;
}

/** Whether the table exists: an audit before `migrate` made it says so instead of failing. */
export async function tableExists(ch: ClickHouseClient, table: string): Promise<boolean> {
  return (await queryText(ch, `EXISTS TABLE ${table}`, LIST_ANSWER_BYTES)).trim() === "1";
}
