/**
 * What a failed insert means for the batch. ClickHouse's answer, or the socket's, is sorted into:
 * - transient: the server or the path to it is unwell (connection refused or reset, timeouts,
 *   overload such as TOO_MANY_PARTS or MEMORY_LIMIT_EXCEEDED, a 5xx without a data error). The same
 *   body may succeed later: retried with backoff, then the whole batch goes to the DLQ.
 * - data: the server refused a value ("Cannot parse input … at row N", type and conversion errors).
 *   Resending the same body can never succeed; the refused rows are isolated (isolate.ts).
 * - shape: the body as a whole is refused although each row may be fine (too many partitions in
 *   one insert block, current releases only). Smaller inserts succeed: split, never dead-lettered.
 * - permanent: configuration (unknown table, authentication, access): no resend helps, no split
 *   either; the batch takes the spec's exhausted path at once.
 * An error this table does not know counts as transient: a retry costs only time.
 */
import { CdrWorkerError } from "../errors.ts";

export type InsertErrorKind = "transient" | "data" | "shape" | "permanent";

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
const PERMANENT_CODES = new Set([
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
  497, // ACCESS_DENIED
  516, // AUTHENTICATION_FAILED
]);
/** 18.16 reports an unknown Enum name as code 49 (LOGICAL_ERROR); the text is what says "data". */
const DATA_TEXT = /Unknown element '.*' for (type )?enum/is;
const SHAPE_TEXT = /Too many partitions for single INSERT block/i;

export class ClickHouseInsertError extends CdrWorkerError {
  override name = "ClickHouseInsertError";
  constructor(
    message: string,
    readonly kind: InsertErrorKind,
    /** ClickHouse's error code, or null when no server answered. */
    readonly serverCode: number | null,
    /** The 1-based row ClickHouse names ("at row N"), within the body sent; a hint, not a proof. */
    readonly row: number | null,
    /** The column ClickHouse names as the one it could not read. */
    readonly column: string | null,
    options?: { cause?: unknown },
  ) {
    super("CLICKHOUSE_INSERT", message, kind === "transient", options);
  }
}

/** Sorts a failed insert (the client's error, or a network error) into a ClickHouseInsertError. */
export function classifyInsertError(cause: unknown, context: string): ClickHouseInsertError {
  const text = cause instanceof Error ? cause.message : String(cause);
  const m = /Code: (\d+)/.exec(text);
  const serverCode = m ? Number(m[1]) : null;
  const row = /\(at row (\d+)\)/.exec(text);
  const kind: InsertErrorKind =
    serverCode === null
      ? "transient"
      : SHAPE_TEXT.test(text)
        ? "shape"
        : DATA_CODES.has(serverCode) || DATA_TEXT.test(text)
          ? "data"
          : PERMANENT_CODES.has(serverCode)
            ? "permanent"
            : "transient";
  return new ClickHouseInsertError(
    `${context}: ${firstLine(text)}`,
    kind,
    serverCode,
    row ? Number(row[1]) : null,
    kind === "data" ? refusedColumn(text) : null,
    { cause },
  );
}

/**
 * The column of the value ClickHouse could not read. Both 18.16 and current releases list the
 * row's columns as `Column N,   name: X, type: …, parsed text: "…"` and mark the failing one with
 * ERROR, right after its parsed text or as `ERROR: text "…" is not like <type>`. Without that
 * mark (an unknown Enum name on 18.16, a UUID on current releases) ClickHouse names no column,
 * and neither does the DLQ envelope.
 */
function refusedColumn(text: string): string | null {
  for (const line of text.split("\n")) {
    const m = /^Column \d+,\s+name: ([^,]+),.*(?:"ERROR$|,\s+ERROR: )/.exec(line.trim());
    if (m) return m[1]!.trim();
  }
  return null;
}

function firstLine(text: string): string {
  const nl = text.indexOf("\n");
  return (nl < 0 ? text : text.slice(0, nl)).trim();
}
