/**
 * The offsets table filled from the rows stored before it existed (`migrate`, once, when it makes
 * the table), in bounded steps that a re-run completes:
 * - a step is one month of the table (its partition) or, for a month of more than STEP_ROWS rows,
 *   a slice of it by cityHash64(cdr_id): each an INSERT … SELECT of at most about STEP_ROWS rows,
 *   well within one request, however large the table;
 * - the plan (each month's slice count) and every step done are rows of `<table>_offsets_backfill`,
 *   the progress table, on the server migrate runs against: a run cut short (a timeout, a kill, a
 *   restart of the Job) is taken up by the next from the first step not done;
 * - a step cut short may have written part of its rows: before it runs again, those are deleted
 *   (a mutation, awaited), so no offset is in the table twice (audit would count it stored twice);
 * - once every step is done the progress table is dropped: an offsets table without one is whole.
 * On a cluster the rows are read and written through the Distributed tables; a step cut short there
 * is not mended by a mutation (it would have to run on every shard's local table): migrate stops with
 * one line naming the statement that empties the offsets table to start again.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";
import { LIST_ANSWER_BYTES, queryText, SMALL_ANSWER_BYTES } from "./answer.ts";

/** The most rows one step copies (about one insert block of ClickHouse's). */
export const STEP_ROWS = 1_000_000;
const MUTATION_POLL_MS = 200;

export const backfillTable = (offsets: string) => `${offsets}_backfill`;

export interface BackfillTarget {
  database: string;
  /** The table read: `<table>`, the Distributed one on a cluster. */
  source: string;
  /** The offsets table written (the Distributed one on a cluster). */
  offsets: string;
  /** Where a cut-short step's rows are deleted: the offsets table of a single server; none on a cluster. */
  mutable: boolean;
  /** The table whose parts the plan reads (system.parts) on a single server. */
  parts: string;
}

export interface BackfillOptions {
  stepRows?: number;
  /** Tests: called before each step; throwing there is a run cut short. */
  beforeStep?: (step: string) => void;
}

/**
 * Makes the progress table for an offsets table made now (`fresh`), then runs every step not done.
 * An offsets table that an older release made and filled whole has no progress table: nothing to do.
 */
export async function backfillOffsets(
  ch: ClickHouseClient,
  t: BackfillTarget,
  fresh: boolean,
  opts: BackfillOptions = {},
): Promise<{ steps: number; rows: number }> {
  const progress = `${t.database}.${backfillTable(t.offsets)}`;
  // A new offsets table holds nothing: the steps of an earlier one (dropped since) do not count.
  if (fresh) await ch.command({ query: `DROP TABLE IF EXISTS ${progress}` });
  if (fresh)
    await ch.command({
      query:
        `CREATE TABLE IF NOT EXISTS ${progress} (step String, rows UInt64, done_at DateTime) ` +
        "ENGINE = MergeTree ORDER BY step",
    });
  else if ((await queryText(ch, `EXISTS TABLE ${progress}`, SMALL_ANSWER_BYTES)).trim() !== "1")
    return { steps: 0, rows: 0 };
  const done = new Map(
    (await lines(ch, `SELECT step, rows FROM ${progress}`)).map((l) => {
      const [step, rows] = l.split("\t");
      return [step!, Number(rows)] as const;
    }),
  );
  let steps = 0;
  let rows = 0;
  for (const { month, slices } of await plan(ch, t, progress, done, opts.stepRows ?? STEP_ROWS)) {
    for (let k = 0; k < slices; k++) {
      const step = `${month}/${k}/${slices}`;
      if (done.has(step)) continue;
      opts.beforeStep?.(step);
      const where =
        `toYYYYMM(session_start_time) = ${month} AND kafka_offset >= 0` +
        (slices > 1 ? ` AND cityHash64(toString(cdr_id)) % ${slices} = ${k}` : "");
      await dropWritten(ch, t, where);
      const counted = `SELECT count() FROM ${t.database}.${t.source} WHERE ${where}`;
      const copied = Number((await queryText(ch, counted, SMALL_ANSWER_BYTES)).trim());
      await ch.command({
        query:
          `INSERT INTO ${t.database}.${t.offsets} SELECT kafka_partition, kafka_offset, cdr_id, ingested_at ` +
          `FROM ${t.database}.${t.source} WHERE ${where}`,
      });
      await ch.command({ query: `INSERT INTO ${progress} VALUES ('${step}', ${copied}, now())` });
      steps++;
      rows += copied;
    }
  }
  // Whole: the progress table goes. An offsets table without one is whole (or an older release's).
  await ch.command({ query: `DROP TABLE ${progress}` });
  return { steps, rows };
}

/**
 * Each month of the table and the slices it is copied in: read once from the parts' row counts and
 * kept (`plan/<month>` rows), so that a re-run slices as the first run did, whatever merges did since.
 */
async function plan(
  ch: ClickHouseClient,
  t: BackfillTarget,
  progress: string,
  done: Map<string, number>,
  stepRows: number,
): Promise<Array<{ month: number; slices: number }>> {
  const kept = [...done].filter(([s]) => s.startsWith("plan/"));
  if (kept.length > 0)
    return kept
      .filter(([s]) => s !== "plan/none")
      .map(([s, slices]) => ({ month: Number(s.slice("plan/".length)), slices }))
      .sort((a, b) => a.month - b.month);
  // A server's parts say its months at no cost; a cluster's shards hold months this node may not:
  // those are counted through the Distributed table (a read of one column, once).
  const parts = await lines(
    ch,
    t.mutable
      ? `SELECT partition, sum(rows) FROM system.parts WHERE active AND database = '${t.database}' ` +
          `AND table = '${t.parts}' GROUP BY partition ORDER BY partition`
      : `SELECT toYYYYMM(session_start_time) AS m, count() FROM ${t.database}.${t.source} GROUP BY m ORDER BY m`,
  );
  const months = parts.map((l) => {
    const [partition, rows] = l.split("\t");
    return { month: Number(partition!.replace(/\D/g, "")), slices: Math.max(1, Math.ceil(Number(rows) / stepRows)) };
  });
  // One row the plan, written before any step: a run cut short after it keeps the same slices.
  const values = months.map((m) => `('plan/${m.month}', ${m.slices}, now())`);
  values.push("('plan/none', 0, now())");
  await ch.command({ query: `INSERT INTO ${progress} VALUES ${values.join(", ")}` });
  return months;
}

/** Deletes the rows a step cut short wrote, awaited; none is the usual case, one read. */
async function dropWritten(ch: ClickHouseClient, t: BackfillTarget, where: string): Promise<void> {
  const mine =
    `(kafka_partition, kafka_offset) IN ` +
    `(SELECT kafka_partition, kafka_offset FROM ${t.database}.${t.source} WHERE ${where})`;
  const counted = `SELECT count() FROM ${t.database}.${t.offsets} WHERE ${mine}`;
  const written = Number((await queryText(ch, counted, SMALL_ANSWER_BYTES)).trim());
  if (written === 0) return;
  if (!t.mutable)
    throw new CdrWorkerError(
      "CLICKHOUSE_SCHEMA",
      `the offsets table's backfill was cut short on a cluster: run TRUNCATE TABLE ${t.database}.${t.offsets}_local ` +
        `ON CLUSTER <name> and DROP TABLE ${t.database}.${backfillTable(t.offsets)}, then migrate again`,
    );
  await ch.command({ query: `ALTER TABLE ${t.database}.${t.offsets} DELETE WHERE ${mine}` });
  const pending =
    `SELECT count() FROM system.mutations ` +
    `WHERE database = '${t.database}' AND table = '${t.offsets}' AND is_done = 0`;
  while (Number((await queryText(ch, pending, SMALL_ANSWER_BYTES)).trim()) > 0) await Bun.sleep(MUTATION_POLL_MS);
}

async function lines(ch: ClickHouseClient, query: string): Promise<string[]> {
  return (await queryText(ch, query, LIST_ANSWER_BYTES)).split("\n").filter(Boolean);
}
