/**
 * What each principal does on ClickHouse, as privileges: one list each that both the role `migrate`
 * makes (`--print-grants`, `--role`, `--dlq-role`) and the start-up check read, so the two cannot
 * drift apart. Two principals, each with its own role, user and secret:
 *
 * The ingesting worker (`run`, role cdr_worker):
 * - INSERT on the table: the batches.
 * - SELECT on the table: which rows are stored (a lost answer's check, `audit`).
 * - SELECT on the offsets table: which offsets are stored (the replay check, `audit`).
 * - SELECT on system.columns: the schema check at start.
 * - SELECT on system.processes: whether its own inserts have ended (insertsEnded, KILL QUERY's own
 *   read). Killing its own queries needs no KILL QUERY grant: ClickHouse asks for it only to kill
 *   another user's, which the worker never does.
 * It holds nothing on the DLQ table: a forged row there cannot be its doing, and its credentials
 * cannot write one.
 *
 * The DLQ table's own (`dlq fill`, `dlq replay --where`, `audit` and `trace`; role cdr_dlq):
 * - INSERT and SELECT on the DLQ table: the filler stores envelopes and reads its position there;
 *   replay selects by it; audit and trace read it.
 * - SELECT on the table and the offsets table: audit and trace read what was stored.
 * - SELECT on system.columns and system.processes: the schema, and the end of the filler's own inserts.
 * ClickHouse 18.16 has no SQL users or grants (docs/security.md says what holds there); the
 * start-up check runs on every server, since users.xml's readonly and allow_databases refuse the
 * same probes.
 */
import { createHash } from "node:crypto";
import type { ClickHouseClient } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";
import { serverError, withCode } from "./insert-error.ts";
import { COLUMN_TYPES, DLQ_COLUMNS, dlqSummaryView, dlqTable, offsetsTable, plainIdentifiers } from "./migrate.ts";

export interface Need {
  privilege: string;
  on: string;
  why: string;
  /** A statement that needs exactly this privilege and changes nothing. */
  probe: string;
}

/** Whose privileges: the ingesting worker's, or the DLQ table's filler, replay and audit's. */
export type Principal = "worker" | "dlq";

/** The roles `migrate` makes by default, one a principal. */
export const DEFAULT_ROLES: Readonly<Record<Principal, string>> = { worker: "cdr_worker", dlq: "cdr_dlq" };

/** What each principal's refusal line calls it. */
const WHO: Readonly<Record<Principal, string>> = { worker: "the worker", dlq: "dlq fill, replay and audit" };

// A zero-row INSERT … SELECT from system.one (readable by every user) asks for INSERT alone.
const ZERO = `CAST(0 AS ${COLUMN_TYPES.get("kafka_partition")!})`;
const nothingFrom = (from: string) => `SELECT count() FROM ${from} WHERE 0`;

/** The privileges `principal` needs on this table and its offsets and DLQ tables. */
export function needsOf(principal: Principal, database: string, table: string): Need[] {
  return principal === "worker" ? workerNeeds(database, table) : dlqNeeds(database, table);
}

export function workerNeeds(database: string, table: string): Need[] {
  plainIdentifiers({ database, table });
  const t = `${database}.${table}`;
  return [
    {
      privilege: "INSERT",
      on: t,
      why: "insert batches",
      probe: `INSERT INTO ${t} (kafka_partition) SELECT ${ZERO} FROM system.one WHERE 0`,
    },
    { privilege: "SELECT", on: t, why: "read which rows are stored", probe: nothingFrom(t) },
    {
      privilege: "SELECT",
      on: `${database}.${offsetsTable(table)}`,
      why: "read which offsets are stored",
      probe: nothingFrom(`${database}.${offsetsTable(table)}`),
    },
    ...systemNeeds(),
  ];
}

/** What `dlq fill`, `dlq replay --where`, `audit` and `trace` need: the DLQ table's own role. */
export function dlqNeeds(database: string, table: string): Need[] {
  plainIdentifiers({ database, table });
  const dlq = `${database}.${dlqTable(table)}`;
  const t = `${database}.${table}`;
  const offsets = `${database}.${offsetsTable(table)}`;
  return [
    {
      privilege: "INSERT",
      on: dlq,
      why: "fill the DLQ table",
      probe: `INSERT INTO ${dlq} (dlq_partition) SELECT ${ZERO} FROM system.one WHERE 0`,
    },
    { privilege: "SELECT", on: dlq, why: "read the DLQ table's position and rows", probe: nothingFrom(dlq) },
    { privilege: "SELECT", on: t, why: "read what was stored (audit, trace)", probe: nothingFrom(t) },
    { privilege: "SELECT", on: offsets, why: "read which offsets are stored (audit)", probe: nothingFrom(offsets) },
    ...systemNeeds(),
  ];
}

function systemNeeds(): Need[] {
  return [
    { privilege: "SELECT", on: "system.columns", why: "check the schema", probe: nothingFrom("system.columns") },
    {
      privilege: "SELECT",
      on: "system.processes",
      why: "see whether its own inserts ended",
      probe: nothingFrom("system.processes"),
    },
  ];
}

/**
 * The statements that make `role` hold exactly `needs` (REVOKE first, so a role made by an older
 * release loses what it no longer needs: the worker's role its grants on the DLQ table), and, with
 * a user, make the role that user's default. The password is never part of them: see userStatements.
 */
export function roleStatements(role: string, needs: readonly Need[], user?: string): string[] {
  plainIdentifiers({ role, ...(user === undefined ? {} : { user }) }, "CONFIG_INVALID");
  const grants = new Map<string, string[]>();
  for (const n of needs) grants.set(n.on, [...(grants.get(n.on) ?? []), n.privilege]);
  return [
    `CREATE ROLE IF NOT EXISTS ${role}`,
    `REVOKE ALL ON *.* FROM ${role}`,
    ...[...grants].map(([on, privileges]) => `GRANT ${privileges.join(", ")} ON ${on} TO ${role}`),
    ...(user === undefined ? [] : [`GRANT ${role} TO ${user}`, `SET DEFAULT ROLE ${role} TO ${user}`]),
  ];
}

/** The DLQ table's readers (docs/security.md): whole records, and analysts without the payload. */
export const DLQ_READER_ROLE = "cdr_dlq_reader";
export const DLQ_ANALYST_ROLE = "cdr_dlq_analyst";

/**
 * The statements that make the DLQ table's two reader roles, apart from the worker's: the reader
 * selects whole envelopes, phone numbers in the payload included; the analyst every column but
 * `original_payload` (a column grant, which the payload-less view `<table>_dlq_summary` needs as
 * well: a view reads with its invoker's rights).
 */
export function readerRoleStatements(database: string, table: string): string[] {
  plainIdentifiers({ database, table });
  const t = `${database}.${dlqTable(table)}`;
  const view = `${database}.${dlqSummaryView(table)}`;
  const columns = DLQ_COLUMNS.map((c) => c.name).filter((c) => c !== "original_payload");
  const role = (name: string, grants: string[]) => [
    `CREATE ROLE IF NOT EXISTS ${name}`,
    `REVOKE ALL ON *.* FROM ${name}`,
    ...grants.map((g) => `${g} TO ${name}`),
  ];
  return [
    ...role(DLQ_READER_ROLE, [`GRANT SELECT ON ${t}`, `GRANT SELECT ON ${view}`]),
    ...role(DLQ_ANALYST_ROLE, [`GRANT SELECT(${columns.join(", ")}) ON ${t}`, `GRANT SELECT ON ${view}`]),
  ];
}

/**
 * Creates the user if missing and sets its password either way, as its SHA-256 (sha256_hash, which
 * every release with SQL users takes): the password itself is in no statement, so in no URL, access
 * log or query log. Two statements instead of a look at system.users first, which would need SHOW
 * USERS besides.
 */
export function userStatements(user: string, password: string): string[] {
  plainIdentifiers({ user }, "CONFIG_INVALID");
  const identified = `IDENTIFIED WITH sha256_hash BY '${createHash("sha256").update(password, "utf8").digest("hex")}'`;
  return [`CREATE USER IF NOT EXISTS ${user} ${identified}`, `ALTER USER ${user} ${identified}`];
}

/**
 * ACCESS_DENIED, READONLY, DATABASE_ACCESS_DENIED (18.16's allow_databases): the user may not do this,
 * and no retry changes that.
 */
const ACCESS_REFUSED: ReadonlySet<number> = new Set([497, 164, 291]);

/** The server's code when a query failed because the user may not do it (ACCESS_REFUSED); else null. */
export function accessRefused(e: unknown): number | null {
  const { code } = serverError(e);
  return code !== null && ACCESS_REFUSED.has(code) ? code : null;
}
/** UNKNOWN_TABLE, UNKNOWN_DATABASE: the schema check's to report (run `migrate`). */
const MISSING = new Set([60, 81]);

/**
 * Runs each of the principal's probes as its user. A refusal stops the command with one line naming
 * the privilege, the object and what it is for; an unreachable server is retryable; a missing table
 * is left to the schema check.
 */
export async function checkGrants(
  ch: ClickHouseClient,
  user: string,
  database: string,
  table: string,
  principal: Principal = "worker",
): Promise<void> {
  for (const need of needsOf(principal, database, table)) {
    try {
      await ch.command({ query: need.probe });
    } catch (cause) {
      const { code, type, text } = serverError(cause);
      if (code !== null && MISSING.has(code)) continue;
      const refused = code !== null && ACCESS_REFUSED.has(code);
      const said = withCode(text, code, type).trim();
      const what = `${need.privilege} ON ${need.on}`;
      const message = refused
        ? `ClickHouse user ${user} lacks ${what}, which ${WHO[principal]} needs to ${need.why}: grant it ` +
          `(cdr-worker migrate --print-grants lists every grant); the server said: ${said}`
        : `cannot check the ClickHouse grants (${what}): ${said}`;
      throw new CdrWorkerError("CLICKHOUSE_ACCESS", message.replace(/\s*\n\s*/g, " "), code === null, { cause });
    }
  }
}
