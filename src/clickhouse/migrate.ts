/**
 * Applies the DDL in sql/ (embedded in the binary) idempotently, and checks at start of `run`
 * that the table takes exactly what the worker writes: every column, of the DDL's type.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import ddl from "../../sql/001_cdr.sql" with { type: "text" };
import clusterDdl from "../../sql/cluster.sql" with { type: "text" };
import dlqDdl from "../../sql/002_dlq.sql" with { type: "text" };
import dlqClusterDdl from "../../sql/002_dlq-cluster.sql" with { type: "text" };
import { CdrWorkerError, SchemaMismatchError, type ErrorCode } from "../errors.ts";
import { LIST_ANSWER_BYTES, queryText } from "./answer.ts";
import { serverError, withCode } from "./insert-error.ts";
import { backfillOffsets, type BackfillOptions } from "./backfill.ts";

/** A name ClickHouse takes as written in SQL text (18.16 has no identifier parameters). */
export const PLAIN_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const IDENT = PLAIN_IDENTIFIER;


/** The column list of sql/001_cdr.sql, "( … )", which sql/cluster.sql's local table takes too. */
const COLUMN_LIST = /\n\(\n[\s\S]*?\n\)\n/.exec(ddl)![0].trim();

const COLUMN_LINES = COLUMN_LIST.split("\n")
  .slice(1, -1)
  .map((l) => /^\s*(\w+)\s+(.+?)(?:\s+DEFAULT\s+(.+?))?,?\s*$/.exec(l)!);

/** Each written column's type as sql/001_cdr.sql declares it: what row-binary.ts encodes. */
export const COLUMN_TYPES: ReadonlyMap<string, string> = new Map(COLUMN_LINES.map((m) => [m[1]!, m[2]!] as const));

/**
 * Columns a table made by an older sql/001_cdr.sql lacks, with their DEFAULT for the rows it
 * already holds: `migrate` adds them (ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS, so the
 * table's columns are read first). The Kafka provenance: -1 marks a row written before it.
 */
export const ADDED_COLUMNS: ReadonlyArray<{ name: string; definition: string }> = COLUMN_LINES.filter((m) =>
  m[1]!.startsWith("kafka_"),
).map((m) => ({ name: m[1]!, definition: `${m[2]} DEFAULT ${m[3]}` }));

/**
 * The statements of the DDL with names filled in; comments go first, since they may hold ';'.
 * With a cluster: sql/cluster.sql, ON CLUSTER (the {shard}/{replica} macros stay for the server).
 */
export function ddlStatements(database: string, table: string, cluster?: string): string[] {
  return statementsOf(cluster ? clusterDdl : ddl, COLUMN_LIST, database, table, cluster);
}

/** The column list of sql/002_dlq.sql: the DLQ table's, which its cluster form takes too. */
const DLQ_COLUMN_LIST = /\n\(\n[\s\S]*?\n\)\n/.exec(dlqDdl)![0].trim();

/** The DLQ table's columns and types (sql/002_dlq.sql), in the order the filler writes them. */
export const DLQ_COLUMNS: ReadonlyArray<{ name: string; type: string }> = DLQ_COLUMN_LIST.split("\n")
  .slice(1, -1)
  .map((l) => /^\s*(\w+)\s+(.+?),?\s*$/.exec(l)!)
  .map((m) => ({ name: m[1]!, type: m[2]! }));

/** The DLQ table (sql/002_dlq.sql) and its view without the payload. */
export const dlqTable = (table: string) => `${table}_dlq`;
export const dlqSummaryView = (table: string) => `${table}_dlq_summary`;

/** The DLQ table's statements (sql/002_dlq.sql, or its cluster form), names filled in. */
export function dlqStatements(database: string, table: string, cluster?: string): string[] {
  return statementsOf(cluster ? dlqClusterDdl : dlqDdl, DLQ_COLUMN_LIST, database, table, cluster);
}

function statementsOf(text: string, columns: string, database: string, table: string, cluster?: string): string[] {
  plainIdentifiers({ database, table, ...(cluster !== undefined ? { cluster } : {}) });
  // Comments first: they may hold ';' and the placeholders' names.
  return text
    .split("\n")
    .filter((l) => !l.trim().startsWith("--"))
    .join("\n")
    .replaceAll("{columns}", columns)
    .replaceAll("{cluster}", cluster ?? "")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => s.replaceAll("{database}", database).replaceAll("{table}", table));
}

/** Names go into statements as text (18.16 has no identifier parameters): plain ones only. */
export function plainIdentifiers(names: Record<string, string>, code: ErrorCode = "CLICKHOUSE_SCHEMA"): void {
  for (const [what, name] of Object.entries(names))
    if (!IDENT.test(name))
      throw new CdrWorkerError(code, `${what} name ${JSON.stringify(name)} is not a plain identifier`);
}

/** The table the replay check and the audit read stored offsets from (sql/001_cdr.sql). */
export const offsetsTable = (table: string) => `${table}_offsets`;

/**
 * Creates what is missing, then upgrades a table made by an older DDL in place: each column of
 * ADDED_COLUMNS it lacks is added. On a cluster the local tables are altered ON CLUSTER (one
 * replica per shard, ZooKeeper carries it to the others); the Distributed table holds no rows of
 * its own and 18.16 refuses ALTER ON CLUSTER of it where shards replicate internally ("Table isn't
 * replicated"), so it is made anew on every node from the local table's columns (docs/upgrade.md:
 * workers stopped first). An offsets table made now is filled from the rows already stored before
 * its view starts to keep it. Idempotent; returns the columns added, for the log.
 */
export async function migrate(
  ch: ClickHouseClient,
  database: string,
  table: string,
  cluster?: string,
  backfill: BackfillOptions = {},
): Promise<string[]> {
  if (cluster) await refuseSingleServerTable(ch, database, table, cluster);
  const statements = ddlStatements(database, table, cluster);
  const isView = (s: string) => s.startsWith("CREATE MATERIALIZED VIEW");
  const rows = cluster ? `${table}_local` : table;
  const offsets = cluster ? `${offsetsTable(table)}_local` : offsetsTable(table);
  const hadOffsets = (await readColumns(ch, database, offsets)).length > 0;
  for (const query of statements) if (!isView(query)) await ch.command({ query });
  const added: string[] = [];
  for (const target of cluster ? [rows, table] : [table]) {
    const have = new Set((await readColumns(ch, database, target)).map((c) => c.name));
    const missing = ADDED_COLUMNS.filter((c) => !have.has(c.name));
    if (missing.length === 0) continue;
    if (cluster && target === table) {
      await ch.command({ query: `DROP TABLE IF EXISTS ${database}.${table} ON CLUSTER ${cluster}` });
      const distributed = `CREATE TABLE IF NOT EXISTS ${database}.${table} `;
      await ch.command({ query: statements.find((q) => q.startsWith(distributed))! });
    } else {
      const onCluster = cluster ? ` ON CLUSTER ${cluster}` : "";
      for (const c of missing)
        await ch.command({
          query: `ALTER TABLE ${database}.${target}${onCluster} ADD COLUMN ${c.name} ${c.definition}`,
        });
    }
    added.push(...missing.map((c) => `${database}.${target}.${c.name}`));
  }
  // Through the Distributed tables on a cluster: each shard's rows, whichever shard they land on
  // (the offsets are only ever read whole). In bounded steps a re-run completes (backfill.ts).
  const target = {
    database,
    source: table,
    offsets: offsetsTable(table),
    mutable: !cluster,
    parts: cluster ? `${table}_local` : table,
  };
  await backfillOffsets(ch, target, !hadOffsets, backfill);
  for (const query of statements) if (isView(query)) await ch.command({ query });
  for (const query of dlqStatements(database, table, cluster)) await ch.command({ query });
  return added;
}

async function readColumns(
  ch: ClickHouseClient,
  database: string,
  table: string,
): Promise<Array<{ name: string; type: string; default_kind: string }>> {
  // Literal names, not query parameters: ClickHouse 18.16 has no {name:Type} parameters.
  const query =
    `SELECT name, type, default_kind FROM system.columns WHERE database = '${database}' AND table = '${table}'`;
  const answer = await queryText(ch, query, LIST_ANSWER_BYTES, { format: "JSONEachRow" });
  return answer
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { name: string; type: string; default_kind: string });
}

/**
 * Throws CLICKHOUSE_SCHEMA when the table is missing (run `migrate`), and SchemaMismatchError
 * (exit 2) naming each written column that is missing, of another type, or not insertable
 * (MATERIALIZED, ALIAS). Types are compared whole (Enum values, Nullable, LowCardinality and all):
 * a binary body read with another type stores other values instead of failing. A DateTime's time
 * zone is the one freedom: it changes how the column is shown, not the UInt32 stored.
 */
export async function checkSchema(ch: ClickHouseClient, database: string, table: string): Promise<void> {
  plainIdentifiers({ database, table });
  await checkColumns(ch, database, table, CDR_SCHEMA);
  if ((await readOrSay(ch, database, offsetsTable(table))).length === 0)
    throw missingTable(database, offsetsTable(table), " (the replay check reads the stored offsets there)");
}

/**
 * The same for the DLQ table and its filler (sql/002_dlq.sql): its rows are RowBinary too
 * (dlq-table/row-binary.ts), read by position and width.
 */
export async function checkDlqSchema(ch: ClickHouseClient, database: string, table: string): Promise<void> {
  plainIdentifiers({ database, table });
  await checkColumns(ch, database, dlqTable(table), DLQ_SCHEMA);
}

async function checkColumns(ch: ClickHouseClient, database: string, name: string, spec: TableSpec): Promise<void> {
  const columns = await readOrSay(ch, database, name);
  if (columns.length === 0) throw missingTable(database, name);
  const problems = schemaProblems(columns, spec);
  if (problems.length) throw new SchemaMismatchError(`${database}.${name}`, problems);
}

/** A table's columns; a read that fails says which table, and whether a retry can help. */
async function readOrSay(ch: ClickHouseClient, database: string, name: string) {
  try {
    return await readColumns(ch, database, name);
  } catch (cause) {
    // No server answer (refused, reset, timed out) may pass; a server's refusal (authentication,
    // access) will not without an operator.
    const { code, type, text } = serverError(cause);
    const message = `cannot read the schema of ${database}.${name}: ${withCode(text, code, type).trim()}`;
    throw new CdrWorkerError("CLICKHOUSE_SCHEMA", message, code === null, { cause });
  }
}

function missingTable(database: string, name: string, why = ""): CdrWorkerError {
  const message = `table ${database}.${name} does not exist${why}; run \`cdr-worker migrate\``;
  return new CdrWorkerError("CLICKHOUSE_SCHEMA", message);
}

/**
 * `migrate --cluster` over a table one server made (not the Distributed table the cluster DDL makes)
 * would half-convert it: empty `_local` and offsets tables beside the old table, which keeps every
 * row. It stops first, with the procedure (docs/upgrade.md).
 */
async function refuseSingleServerTable(ch: ClickHouseClient, database: string, table: string, cluster: string) {
  const query = `SELECT engine FROM system.tables WHERE database = '${database}' AND name = '${table}'`;
  const engine = (await queryText(ch, query, LIST_ANSWER_BYTES)).trim();
  if (engine === "" || engine === "Distributed") return;
  throw new CdrWorkerError(
    "CLICKHOUSE_SCHEMA",
    `${database}.${table} is a single server's table (${engine}), not the Distributed table of a cluster: ` +
      `migrate --cluster ${cluster} changes nothing; move it as docs/upgrade.md#from-one-server-to-a-cluster says`,
  );
}

/**
 * What makes the table unfit for the worker's binary rows now, as `checkSchema` reads it: empty when
 * it fits. The writer asks after a refused insert, so a table changed under a running worker (a
 * column retyped or dropped) is told from a refusal of the rows.
 */
export async function tableProblems(ch: ClickHouseClient, database: string, table: string): Promise<string[]> {
  const columns = await readColumns(ch, database, table);
  return columns.length === 0 ? [`table ${database}.${table} does not exist`] : schemaProblems(columns);
}

/** A table's columns as a writer of binary rows needs them, and where they are written down. */
interface TableSpec {
  types: ReadonlyMap<string, string>;
  source: string;
  writer: string;
  /** Columns `migrate` adds to a table made before them. */
  added: ReadonlyArray<{ name: string }>;
}

const CDR_SCHEMA: TableSpec = {
  types: COLUMN_TYPES,
  source: "sql/001_cdr.sql",
  writer: "the worker",
  added: ADDED_COLUMNS,
};

/** The DLQ table's (sql/002_dlq.sql): what the filler's binary rows are exact against. */
const DLQ_SCHEMA: TableSpec = {
  types: new Map(DLQ_COLUMNS.map((c) => [c.name, c.type])),
  source: "sql/002_dlq.sql",
  writer: "the DLQ table's filler",
  added: [],
};

/** What keeps the writer from writing exactly into a table of these columns; empty when nothing. */
export function schemaProblems(
  columns: ReadonlyArray<{ name: string; type: string; default_kind?: string }>,
  spec: TableSpec = CDR_SCHEMA,
): string[] {
  const { types, source, writer, added } = spec;
  const have = new Map(columns.map((c) => [c.name, c]));
  const problems: string[] = [];
  for (const [name, type] of types) {
    const c = have.get(name);
    if (!c)
      problems.push(
        `column ${name} is missing; ${writer} writes it as ${type} (${source})` +
          (added.some((a) => a.name === name) ? ": run `cdr-worker migrate`, which adds it" : ""),
      );
    else if (!sameType(c.type, type))
      problems.push(
        `column ${name} is ${c.type}; ${writer} writes ${type}, and a binary insert would store ` +
          `other values in it: make the column ${type} as in ${source}`,
      );
    else if (c.default_kind === "MATERIALIZED" || c.default_kind === "ALIAS")
      problems.push(`column ${name} is ${c.default_kind}, so no insert may write it; ${writer} writes it as ${type}`);
  }
  return problems;
}

function sameType(have: string, want: string): boolean {
  const norm = (t: string) => t.replace(/\s+/g, "").replace(/^DateTime\('[^']*'\)$/, "DateTime");
  return norm(have) === norm(want);
}
