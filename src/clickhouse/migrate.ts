/**
 * Applies the DDL in sql/ (embedded in the binary) idempotently, and checks at start of `run`
 * that the table has every column the worker writes.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import ddl from "../../sql/001_cdr.sql" with { type: "text" };
import clusterDdl from "../../sql/cluster.sql" with { type: "text" };
import { CdrWorkerError } from "../errors.ts";
import { serverError, withCode } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The column list of sql/001_cdr.sql, "( … )", which sql/cluster.sql's local table takes too. */
const COLUMN_LIST = /\n\(\n[\s\S]*?\n\)\n/.exec(ddl)![0].trim();

/**
 * The statements of the DDL with names filled in; comments go first, since they may hold ';'.
 * With a cluster: sql/cluster.sql, ON CLUSTER (the {shard}/{replica} macros stay for the server).
 */
export function ddlStatements(database: string, table: string, cluster?: string): string[] {
  for (const [what, name] of [
    ["database", database],
    ["table", table],
    ["cluster", cluster ?? "none"],
  ] as const) {
    if (!IDENT.test(name))
      throw new CdrWorkerError("CLICKHOUSE_SCHEMA", `${what} name ${JSON.stringify(name)} is not a plain identifier`);
  }
  // Comments first: they may hold ';' and the placeholders' names.
  return (cluster ? clusterDdl : ddl)
    .split("\n")
    .filter((l) => !l.trim().startsWith("--"))
    .join("\n")
    .replaceAll("{columns}", COLUMN_LIST)
    .replaceAll("{cluster}", cluster ?? "")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => s.replaceAll("{database}", database).replaceAll("{table}", table));
}

export async function migrate(ch: ClickHouseClient, database: string, table: string, cluster?: string): Promise<void> {
  for (const query of ddlStatements(database, table, cluster)) await ch.command({ query });
}

/**
 * checkSchema on each endpoint until one has the table, as inserts fail over (writer.ts): a refusal
 * that belongs to one endpoint (authentication, a table or columns missing there) moves on to the
 * next. When none passes, the refusal an operator must fix is thrown before an unreachable one.
 */
export async function checkSchemaOnAny(
  clients: readonly ClickHouseClient[],
  database: string,
  table: string,
): Promise<void> {
  const failures: CdrWorkerError[] = [];
  for (const ch of clients) {
    try {
      return await checkSchema(ch, database, table);
    } catch (e) {
      if (!(e instanceof CdrWorkerError)) throw e;
      failures.push(e);
    }
  }
  throw failures.find((e) => !e.retryable) ?? failures[0];
}

/** Throws CLICKHOUSE_SCHEMA naming what is missing; the worker refuses to start without it. */
export async function checkSchema(ch: ClickHouseClient, database: string, table: string): Promise<void> {
  ddlStatements(database, table); // validates both names as plain identifiers
  // Literal names, not query parameters: ClickHouse 18.16 has no {name:Type} parameters.
  let names: Array<{ name: string }>;
  try {
    const rs = await ch.query({
      query: `SELECT name FROM system.columns WHERE database = '${database}' AND table = '${table}'`,
      format: "JSONEachRow",
    });
    names = await rs.json<{ name: string }>();
  } catch (cause) {
    // No server answer (refused, reset, timed out) may pass; a server's refusal (authentication,
    // access) will not without an operator.
    const { code, type, text } = serverError(cause);
    const message = `cannot read the schema of ${database}.${table}: ${withCode(text, code, type).trim()}`;
    throw new CdrWorkerError("CLICKHOUSE_SCHEMA", message, code === null, { cause });
  }
  const have = new Set(names.map((r) => r.name));
  if (have.size === 0)
    throw new CdrWorkerError(
      "CLICKHOUSE_SCHEMA",
      `table ${database}.${table} does not exist; run \`cdr-worker migrate\``,
    );
  const missing = COLUMNS.filter((c) => !have.has(c));
  if (missing.length)
    throw new CdrWorkerError(
      "CLICKHOUSE_SCHEMA",
      `table ${database}.${table} lacks columns ${missing.join(", ")}; run \`cdr-worker migrate\``,
    );
}
