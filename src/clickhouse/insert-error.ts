/**
 * What a failed insert means for the batch. ClickHouse's answer, or the socket's, is sorted into:
 * - transient: the path to the server is unwell, or the server said something this table does not
 *   know (connection refused or reset, timeouts, a 5xx without a ClickHouse code). The same body may
 *   succeed later: retried with backoff, then the whole batch goes to the DLQ.
 * - condition: the server answered, and what it said is about itself, not the rows: short of memory
 *   as a whole or for the user, too many simultaneous queries, too many parts, a read-only replica,
 *   Keeper unreachable. Smaller inserts fail alike, so the batch is retried whole and never split
 *   (DECISIONS "Commits and rebalances"); under CH_UNREACHABLE_POLICY=wait it counts as ClickHouse not answering.
 * - data: the server refused a value ("Cannot parse input … at row N", type and conversion errors).
 *   Resending the same body can never succeed, on any endpoint; the refused rows are isolated
 *   (store.ts).
 * - shape: the body as a whole is refused although each row may be fine (too many partitions in
 *   one insert block, current releases only; the memory limit of the query itself,
 *   MEMORY_LIMIT_EXCEEDED "(for query)"). Smaller inserts succeed: split, down to one row; a row the server
 *   refuses alone for its size goes to the DLQ whole (store.ts).
 * - configuration: a refusal of the worker, not of its rows (unknown table, database or column,
 *   authentication, access, a read-only user, a setting or syntax the server does not know). Every
 *   row would be refused alike, and what helps is the operator undoing a change or the secret file
 *   holding the new value (DECISIONS "Commits and rebalances"). It belongs to its endpoint: the
 *   writer tries the next one at once. Refused by every endpoint, it is retried whole and never
 *   split: under the default it spends the retry budget, then takes the spec's path; under
 *   CH_UNREACHABLE_POLICY=wait it counts as ClickHouse not answering.
 * An error this table does not know counts as transient: a retry costs only time.
 *
 * Where the answer comes from: current servers end every exception with `(TYPE) (version …)`, and
 * `@clickhouse/client`'s parseError then keeps the number in `.code` and the name in `.type`, not
 * in `.message`; 18.16 writes `Code: N, e.displayText() = …` with no type, which the client leaves
 * as text. So the code is read from `.code` where the client set it, else from the text.
 * test/clickhouse/insert-error.test.ts feeds both servers' captured answers through the client.
 */
import { ClickHouseError } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";

export type InsertErrorKind = "transient" | "condition" | "data" | "shape" | "configuration";

/** An insert that failed after it may have stored its rows. */
export interface UncertainAttempt {
  endpoint: number;
  queryId: string;
  /**
   * When (the writer's monotonic clock, ms) the server has ended this insert whatever it did, where
   * the server bounds an insert's life (server-version.ts's boundsInsertLife); absent elsewhere.
   */
  endedBy?: number;
  /** When (the same clock) the attempt failed: how long an endpoint's silence has held its check. */
  failedAt?: number;
}

// ClickHouse error codes (src/Common/ErrorCodes.cpp), the same numbers on 18.16 and current releases.
const DATA_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND
  70, // CANNOT_CONVERT_TYPE
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA
  131, // TOO_LARGE_STRING_SIZE
  321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  376, // CANNOT_PARSE_UUID
  469, // VIOLATED_CONSTRAINT
  691, // UNKNOWN_ELEMENT_OF_ENUM
]);
/** Refusals of the worker (the header above): the operator's changes, the same for every row. */
const CONFIGURATION_CODES = new Set([
  16, // NO_SUCH_COLUMN_IN_TABLE
  47, // UNKNOWN_IDENTIFIER
  60, // UNKNOWN_TABLE
  62, // SYNTAX_ERROR
  81, // UNKNOWN_DATABASE
  115, // UNKNOWN_SETTING
  164, // READONLY
  192, // UNKNOWN_USER
  193, // WRONG_PASSWORD
  194, // REQUIRED_PASSWORD
  291, // DATABASE_ACCESS_DENIED (18.16's allow_databases)
  497, // ACCESS_DENIED
  516, // AUTHENTICATION_FAILED
]);
/** Refusals of the worker's credentials: its password file may hold a newer secret (credentials.ts). */
export const AUTHENTICATION_CODES = new Set([192, 193, 194, 516]);
/** 18.16 reports an unknown Enum name as code 49 (LOGICAL_ERROR); the text is what says "data". */
const DATA_TEXT = /Unknown element '.*' for (type )?enum/is;
/** Refusals of an insert for its size: split until the parts fit, where QUERY_LIMIT_TEXT says so. */
export const SIZE_CODES = new Set([
  241, // MEMORY_LIMIT_EXCEEDED
]);
/**
 * 241 names the tracker that ran out: the query's own ("Memory limit (for query) exceeded" on 18.16,
 * "Query memory limit exceeded" on current releases) is the body's size; "(total)" and "(for user)"
 * are the server's, and halves fail alike.
 */
const QUERY_LIMIT_TEXT = /\(for query\)|\bQuery memory limit exceeded/i;
/** Code 252 is also "too many parts, merges are slower than inserts", an overload: the text decides. */
const SHAPE_TEXT = /Too many partitions for single INSERT block/i;
/** Conditions of the server (the header above): what helps is time, the same body unchanged. */
const CONDITION_CODES = new Set([
  202, // TOO_MANY_SIMULTANEOUS_QUERIES
  225, // NO_ZOOKEEPER
  241, // MEMORY_LIMIT_EXCEEDED, unless QUERY_LIMIT_TEXT
  242, // TABLE_IS_READ_ONLY
  252, // TOO_MANY_PARTS, unless SHAPE_TEXT
  319, // UNKNOWN_STATUS_OF_INSERT (Keeper lost while the insert committed)
  999, // KEEPER_EXCEPTION
]);
/** Conditions refused before the query runs at all: nothing of the body can have been stored. */
const REFUSED_BEFORE_RUN = new Set([202]);
/**
 * The exception's name at the end of a current server's text: `… (UNKNOWN_TABLE) (version 26.9.2.1)`.
 * Read from the text's tail with a pattern that cannot backtrack: the text can quote a record's
 * values, and `[A-Z0-9_]*[A-Z]{3}[A-Z0-9_]*` over a long run of capitals took seconds (16 s for 80,000,
 * on the event loop; test/fixtures/fuzz/clickhouse-error.json).
 */
const TYPE_SUFFIX = /\(([A-Z][A-Z0-9_]*)\)(?: \(version [^)]*\))?\s*$/;
const TYPE_TAIL_CHARS = 256;

function exceptionType(text: string): string | null {
  const name = TYPE_SUFFIX.exec(text.slice(-TYPE_TAIL_CHARS))?.[1];
  return name !== undefined && /[A-Z]{3}/.test(name) ? name : null;
}

/** What the server said of a refused insert; every field null where no server answered. */
export interface ServerAnswer {
  /** ClickHouse's error code. */
  code: number | null;
  /** ClickHouse's name for the code (`UNKNOWN_TABLE`) where the server gave one (not 18.16). */
  type?: string | null;
  /** The 1-based row ClickHouse names ("at row N"), within the body sent; a hint, not a proof. */
  row?: number | null;
  /** The column ClickHouse names as the one it could not read. */
  column?: string | null;
}

export class ClickHouseInsertError extends CdrWorkerError {
  override name = "ClickHouseInsertError";
  readonly serverCode: number | null;
  readonly serverType: string | null;
  readonly row: number | null;
  readonly column: string | null;
  /** No endpoint answered at all (every one refused the connection, reset it or timed out). */
  readonly unreachable: boolean;
  /**
   * The server may have stored the rows although the insert failed: its answer was lost (a timeout,
   * a reset or hang-up after the request went out, a proxy's 5xx) or the failure can follow a partial
   * write (an overload, a shard of a Distributed insert). Only a refusal before any row is written
   * (a value, the table, a grant) or a connection never made is known to have stored nothing.
   */
  readonly mayHaveStored: boolean;
  /**
   * A lost answer's check waits for the one endpoint that can answer it (HeldCheckError): no attempt
   * is spent on it (retry.ts), whatever CH_UNREACHABLE_POLICY says.
   */
  readonly held: boolean;
  /** The attempts that may have stored rows: each one's endpoint and query id (running-inserts.ts's end). */
  attempts: UncertainAttempt[] = [];
  constructor(
    message: string,
    readonly kind: InsertErrorKind,
    answer: ServerAnswer = { code: null },
    options?: { cause?: unknown; unreachable?: boolean; mayHaveStored?: boolean; held?: boolean },
  ) {
    super("CLICKHOUSE_INSERT", message, kind !== "data" && kind !== "shape", options);
    this.unreachable = options?.unreachable ?? false;
    this.mayHaveStored = options?.mayHaveStored ?? false;
    this.held = options?.held ?? false;
    this.serverCode = answer.code;
    this.serverType = answer.type ?? null;
    this.row = answer.row ?? null;
    this.column = answer.column ?? null;
  }
}

/**
 * A lost answer's check that one endpoint holds: the endpoint that took the insert does not answer
 * while another does. Only it can say what it stored (a replica's rows reach the others when they
 * fetch from it), and a resend elsewhere could store the rows twice, so the check waits for it
 * until `until` (the writer's monotonic ms); past that its silence counts as any other failure's.
 * Retryable: the endpoint's return is what it waits for.
 */
export class HeldCheckError extends CdrWorkerError {
  override name = "HeldCheckError";
  constructor(
    readonly endpoint: string,
    readonly until: number,
    cause: unknown,
  ) {
    const what = `the endpoint ${endpoint} took an insert whose answer was lost and does not answer`;
    super("CLICKHOUSE_INSERT", what, true, { cause });
  }
}

/** The server's error code and name, from the client's ClickHouseError where it parsed them, else the text. */
export function serverError(cause: unknown): { code: number | null; type: string | null; text: string } {
  const text = cause instanceof Error ? cause.message : String(cause);
  const { code, type } = (cause ?? {}) as { code?: unknown; type?: unknown };
  const m = typeof code === "string" && /^\d+$/.test(code) ? code : /Code: (\d+)/.exec(text)?.[1];
  const t = typeof type === "string" && type ? type : exceptionType(text);
  return { code: m === undefined ? null : Number(m), type: t, text };
}

/**
 * A refused request read whole, as the writer does for inserts (`exec` with `ignore_error_response`):
 * the client's own parseError keeps only the innermost message of a current server's text, which
 * drops the "(at row N)" and column lines that refused-row isolation reads. The code comes from
 * the `X-ClickHouse-Exception-Code` header (current servers), else the text (18.16 has no header).
 */
export function refusal(status: number | undefined, headers: Record<string, unknown>, body: string): ClickHouseError {
  const header = headers["x-clickhouse-exception-code"];
  const code = typeof header === "string" ? header : (/Code: (\d+)/.exec(body)?.[1] ?? "");
  const type = exceptionType(body) ?? "";
  const text = body.trim() || `HTTP ${status ?? "?"} with an empty body`;
  return new ClickHouseError({ message: text, code, type });
}

/** Sorts a failed insert (the client's error, or a network error) into a ClickHouseInsertError. */
export function classifyInsertError(cause: unknown, context: string): ClickHouseInsertError {
  const { code: serverCode, type, text } = serverError(cause);
  // "(at row N)" for a value that did not parse, "violated at row N" for a CHECK constraint (current releases).
  const row = /\(at row (\d+)\)|is violated at row (\d+)\b/.exec(text);
  const kind = kindOf(serverCode, text);
  const mayHaveStored =
    (kind === "transient" ||
      (kind === "condition" && !REFUSED_BEFORE_RUN.has(serverCode ?? -1)) ||
      (kind === "shape" && SIZE_CODES.has(serverCode ?? -1))) &&
    !neverConnected(cause);
  return new ClickHouseInsertError(
    `${context}: ${firstLine(withCode(text, serverCode, type))}`,
    kind,
    {
      code: serverCode,
      type,
      row: row ? Number(row[1] ?? row[2]) : null,
      column: kind === "data" ? refusedColumn(text) : null,
    },
    { cause, mayHaveStored },
  );
}

function kindOf(code: number | null, text: string): InsertErrorKind {
  if (code === null) return "transient";
  if (SHAPE_TEXT.test(text) || (SIZE_CODES.has(code) && QUERY_LIMIT_TEXT.test(text))) return "shape";
  if (CONDITION_CODES.has(code)) return "condition";
  if (DATA_CODES.has(code) || DATA_TEXT.test(text)) return "data";
  return CONFIGURATION_CODES.has(code) ? "configuration" : "transient";
}

/**
 * A failure that says nothing of the rows: no answer at all, a condition of the server's, or a
 * refusal of the worker. While every endpoint fails so, CH_UNREACHABLE_POLICY=wait waits (DECISIONS).
 */
export function saysNothingOfRows(e: ClickHouseInsertError): boolean {
  return e.serverCode === null || e.kind === "condition" || e.kind === "configuration";
}

/** Errors of a connection that was never made: the request never left, nothing can be stored. */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

function neverConnected(cause: unknown): boolean {
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === "string" && NOT_CONNECTED.has(code);
}

/**
 * The column of the value ClickHouse could not read. Both 18.16 and current releases list the
 * row's columns as `Column N,   name: X, type: …, parsed text: "…"` and mark the failing one with
 * ERROR, right after its parsed text or as `ERROR: text "…" is not like <type>`. A CHECK
 * constraint lists the values it read (`Column values: service_type = '…'`): one column is the
 * refused one, several leave it open. Without either (an unknown Enum name on 18.16, a UUID on
 * current releases) ClickHouse names no column, and neither does the DLQ envelope.
 */
function refusedColumn(text: string): string | null {
  const constraint = /Column values: (\w+) = (?:'(?:[^'\\]|\\.)*'|[^,']*)\.?(?:\s*\(|\s*$)/m.exec(text);
  if (constraint) return constraint[1]!;
  for (const line of text.split("\n")) {
    const m = /^Column \d+,\s+name: ([^,]+),.*(?:"ERROR$|,\s+ERROR: )/.exec(line.trim());
    if (m) return m[1]!.trim();
  }
  return null;
}

/** The text as it names its code: the client's parseError leaves `Code: N` out of a current server's. */
export function withCode(text: string, code: number | null, type: string | null): string {
  return /Code: \d+/.test(text) || code === null ? text : `Code: ${code}${type ? ` (${type})` : ""}. ${text}`;
}

function firstLine(text: string): string {
  const nl = text.indexOf("\n");
  return (nl < 0 ? text : text.slice(0, nl)).trim();
}
