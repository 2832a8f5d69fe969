/**
 * The offsets table (`<table>_offsets`) keeps a row a stored record, and nothing ends its life:
 * 18.16 has no table TTL. What reads it needs only offsets Kafka still keeps (the replay check reads
 * past the group's commit; `audit` reads the raw topic's retained range, 24 h by default), so whole
 * monthly partitions whose every row is older than the window kept are dropped. Run as the admin
 * (`migrate --prune-offsets`): the worker's own role holds no ALTER, by design.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";
import { LIST_ANSWER_BYTES, queryText } from "./answer.ts";
import { offsetsTable } from "./migrate.ts";

/** The shortest window kept: far above the raw topic's retention that `topics ensure` sets (24 h). */
export const MIN_KEEP_DAYS = 7;

/**
 * Monthly partitions (`YYYYMM`) of which every row is older than `keepDays` before `now`: the whole
 * month ended before the window began. The current month, and any month in the window, stay.
 */
export function expiredMonths(partitions: readonly string[], keepDays: number, now: Date): string[] {
  const cutoff = now.getTime() - keepDays * 86_400_000;
  return partitions.filter((p) => {
    const m = /^(\d{4})(\d{2})$/.exec(p);
    if (!m) return false; // not the offsets table's PARTITION BY toYYYYMM: left alone
    const endOfMonth = Date.UTC(Number(m[1]), Number(m[2]), 1); // the first instant of the next month
    return endOfMonth <= cutoff;
  });
}

/** Drops the offsets table's expired monthly partitions (on every node with `cluster`); returns them. */
export async function pruneOffsets(
  ch: ClickHouseClient,
  database: string,
  table: string,
  keepDays: number,
  opts: { cluster?: string; now?: Date } = {},
): Promise<string[]> {
  if (!(keepDays >= MIN_KEEP_DAYS)) {
    const why = `at least ${MIN_KEEP_DAYS}, above the raw topic's retention`;
    throw new CdrWorkerError("CONFIG_INVALID", `--keep-days ${keepDays}: ${why}`);
  }
  const target = opts.cluster ? `${offsetsTable(table)}_local` : offsetsTable(table);
  const listed = await queryText(
    ch,
    `SELECT DISTINCT partition FROM system.parts WHERE database = '${database}' AND table = '${target}' AND active`,
    LIST_ANSWER_BYTES,
  );
  const expired = expiredMonths(listed.split("\n").filter(Boolean), keepDays, opts.now ?? new Date()).sort();
  const onCluster = opts.cluster ? ` ON CLUSTER ${opts.cluster}` : "";
  for (const p of expired)
    await ch.command({ query: `ALTER TABLE ${database}.${target}${onCluster} DROP PARTITION ${p}` });
  return expired;
}
