/**
 * Which rows of a batch the table holds, asked at the sorting key's own points: the queries that
 * read them and the lines they answer. The writer sends them (writer.ts storedRows); the flush stage
 * names the rows (delivery/flush/insert-once.ts).
 */

/**
 * Where a batch's rows are looked up: their provenance, at the sorting key's own points. A row is
 * found by its session_start_time second (the key's first column), so the read costs the rows the
 * table holds in the batch's seconds, however far apart those seconds lie (epoch 0 beside now), and
 * never the span between them. Its cdr_id must match too: a row an older life of the topic stored
 * at the same partition and offset is another record, unless it is the same one.
 */
export interface RowLookup {
  partitions: readonly number[];
  minOffset: number;
  maxOffset: number;
  /** The rows' session_start_time values (s), each once. */
  starts: readonly number[];
}

/** A stored row as a lookup names it: `partition:offset:cdr_id:session_start_time`. */
export function storedRowKey(partition: number, offset: number, cdrId: string, start: number): string {
  return `${partition}:${offset}:${cdrId}:${start}`;
}

/** Runs of consecutive seconds one lookup query names at most: the query's text stays small. */
const RUNS_PER_READ = 256;

/** The distinct seconds as runs [first, last] of consecutive seconds, ascending. */
export function secondRuns(starts: readonly number[]): Array<[number, number]> {
  const sorted = [...new Set(starts)].sort((a, b) => a - b);
  const runs: Array<[number, number]> = [];
  for (const s of sorted) {
    const last = runs[runs.length - 1];
    if (last && s === last[1] + 1) last[1] = s;
    else runs.push([s, s]);
  }
  return runs;
}

/** The queries that read the rows `lookup` names from `table`: one for every RUNS_PER_READ runs of seconds. */
export function rowLookupQueries(table: string, lookup: RowLookup): string[] {
  const runs = secondRuns(lookup.starts);
  const queries: string[] = [];
  for (let i = 0; i < runs.length; i += RUNS_PER_READ) {
    const seconds = runs
      .slice(i, i + RUNS_PER_READ)
      .map(([a, b]) =>
        a === b
          ? `session_start_time = toDateTime(${a})`
          : `(session_start_time >= toDateTime(${a}) AND session_start_time <= toDateTime(${b}))`,
      )
      .join(" OR ");
    queries.push(
      `SELECT kafka_partition, kafka_offset, toString(cdr_id), toUInt32(session_start_time) FROM ${table} ` +
        `WHERE (${seconds}) AND kafka_partition IN (${lookup.partitions.join(", ")}) ` +
        `AND kafka_offset >= ${lookup.minOffset} AND kafka_offset <= ${lookup.maxOffset}`,
    );
  }
  return queries;
}

/**
 * The storedRowKey()s of a lookup query's answer. Throws on a line that does not parse: ClickHouse
 * can append an exception to a 200 answer it already began, and a partial answer would send rows twice.
 */
export function storedRowKeys(answer: string, into: Set<string>): void {
  for (const line of answer.split("\n")) {
    if (!line) continue;
    const m = /^(-?\d+)\t(-?\d+)\t([0-9a-f-]{36})\t(\d+)$/.exec(line);
    if (!m) throw new Error(`reading which rows are stored: an answer line that is not a row: ${line.slice(0, 200)}`);
    into.add(storedRowKey(Number(m[1]), Number(m[2]), m[3]!, Number(m[4])));
  }
}
