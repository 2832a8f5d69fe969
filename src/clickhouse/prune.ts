/**
 * Retention by whole partitions, the one mechanism for the tables that 18.16 (which has no table
 * TTL) would otherwise keep for ever. Run as the admin: the worker's own role holds no ALTER, by design.
 * - The offsets table (`<table>_offsets`, monthly partitions): what reads it needs only offsets
 *   Kafka still keeps (the replay check reads past the group's commit; `audit` reads the raw topic's
 *   retained range, 24 h by default). `migrate --prune-offsets`.
 * - The DLQ table (`<table>_dlq`, daily partitions of the day a row was stored): kept as long as the
 *   DLQ topic keeps its envelopes by default. `migrate --prune-dlq`.
 * A partition goes once every row in it is older than the window kept.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";
import { LIST_ANSWER_BYTES, queryText } from "./answer.ts";
import { dlqTable, offsetsTable } from "./migrate.ts";

/** The shortest window kept: far above the raw topic's retention that `topics ensure` sets (24 h). */
export const MIN_KEEP_DAYS = 7;

/**
 * Monthly (`YYYYMM`) or daily (`YYYYMMDD`) partitions of which every row is older than `keepDays`
 * before `now`: the whole month or day ended before the window began. The current one, and any in
 * the window, stay; a partition of another form is left alone.
 */
export function expiredPartitions(partitions: readonly string[], keepDays: number, now: Date): string[] {
  const cutoff = now.getTime() - keepDays * 86_400_000;
  return partitions.filter((p) => {
    const m = /^(\d{4})(\d{2})(\d{2})?$/.exec(p);
    if (!m) return false;
    const [y, mo] = [Number(m[1]), Number(m[2])];
    // The first instant after the partition: the next month, or the next day.
    const end = m[3] === undefined ? Date.UTC(y, mo, 1) : Date.UTC(y, mo - 1, Number(m[3]) + 1);
    return end <= cutoff;
  });
}

/** The monthly form alone (the offsets table's). */
export const expiredMonths = (partitions: readonly string[], keepDays: number, now: Date): string[] =>
  expiredPartitions(partitions.filter((p) => /^\d{6}$/.test(p)), keepDays, now);

/** The tables pruned: each one's name, shortest window and why. */
const PRUNED = {
  offsets: { name: offsetsTable, minDays: MIN_KEEP_DAYS, why: "above the raw topic's retention" },
  dlq: { name: dlqTable, minDays: 1, why: "one day" },
} as const;
export type Pruned = keyof typeof PRUNED;

/** The table `which` names, as `migrate --prune-*` reports it. */
export const prunedTable = (which: Pruned, table: string) => PRUNED[which].name(table);

/**
 * Drops the expired partitions of the offsets table (monthly) or the DLQ table (daily), on every
 * node with `cluster`; returns them. A window shorter than the table's shortest is refused.
 */
export async function pruneTable(
  ch: ClickHouseClient,
  database: string,
  table: string,
  which: Pruned,
  keepDays: number,
  opts: { cluster?: string; now?: Date } = {},
): Promise<string[]> {
  const { name, minDays, why } = PRUNED[which];
  if (!(keepDays >= minDays))
    throw new CdrWorkerError("CONFIG_INVALID", `--keep-days ${keepDays}: at least ${minDays}, ${why}`);
  return dropExpired(ch, database, name(table), keepDays, opts);
}

/** The DLQ table's window by default: the DLQ topic's retention, in whole days (at least one). */
export function dlqKeepDays(retentionMs: number): number {
  return Math.max(1, Math.ceil(retentionMs / 86_400_000));
}

async function dropExpired(
  ch: ClickHouseClient,
  database: string,
  name: string,
  keepDays: number,
  opts: { cluster?: string; now?: Date },
): Promise<string[]> {
  const target = opts.cluster ? `${name}_local` : name;
  const listed = await queryText(
    ch,
    `SELECT DISTINCT partition FROM system.parts WHERE database = '${database}' AND table = '${target}' AND active`,
    LIST_ANSWER_BYTES,
  );
  const expired = expiredPartitions(listed.split("\n").filter(Boolean), keepDays, opts.now ?? new Date()).sort();
  const onCluster = opts.cluster ? ` ON CLUSTER ${opts.cluster}` : "";
  for (const p of expired)
    await ch.command({ query: `ALTER TABLE ${database}.${target}${onCluster} DROP PARTITION ${p}` });
  return expired;
}
