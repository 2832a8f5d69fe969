// Messages as 18.16 (Debian) and the current engine (chdb-core 26.9) write them, for the same bodies.
import { expect, test } from "bun:test";
import { classifyInsertError } from "../../src/clickhouse/insert-error.ts";

const CH18_FIXED_STRING = 'Code: 131, e.displayText() = DB::Exception: Too large value for FixedString(2): (at row 1)\n\nRow 1:\nColumn 0,   name: s, type: Enum8(\'a\' = 1),  parsed text: "a"\nColumn 1,   name: f, type: FixedString(2),  parsed text: "abc"ERROR\n\n, e.what() = DB::Exception\n';
const CH18_ENUM = "Code: 49, e.displayText() = DB::Exception: Unknown element 'b' for type Enum8('a' = 1), e.what() = DB::Exception\n";
const CH18_DATETIME = 'Code: 41, e.displayText() = DB::Exception: Cannot parse datetime: (at row 3)\n\nRow 3:\nColumn 0,   name: d, type: DateTime(\'UTC\'), parsed text: "1"ERROR\n\n, e.what() = DB::Exception\n';
const CH18_NOT_LIKE = 'Code: 41, e.displayText() = DB::Exception: Cannot parse datetime: (at row 2)\n\nRow 1:\nColumn 0,   name: a, type: UInt8,           parsed text: "1"\nColumn 1,   name: d, type: DateTime(\'UTC\'), parsed text: "0000000001"\n\nRow 2:\nColumn 0,   name: a, type: UInt8,           parsed text: "1"\nColumn 1,   name: d, type: DateTime(\'UTC\'), ERROR: text "x<TAB>1<LINE FEED>" is not like DateTime(\'UTC\')\n\n, e.what() = DB::Exception\n';
const CH26_ENUM = 'Code: 691. DB::Exception: Unknown element \'b\' for enum, maybe you meant: [\'a\']: (at row 2)\n: \nRow 1:\nColumn 0,   name: s, type: Enum8(\'a\' = 1),  parsed text: "a"\nColumn 1,   name: f, type: FixedString(2),  parsed text: "ab"\n\nRow 2:\nColumn 0,   name: s, type: Enum8(\'a\' = 1),  parsed text: "b"ERROR\nCode: 691. DB::Exception: Unknown element';
const CH26_UUID = "Code: 376. DB::Exception: Cannot parse uuid zz\t1\t0000000001\n: (at row 1)\n: Buffer has gone, cannot extract information about what has been parsed: While executing ParallelParsingBlockInputFormat. (CANNOT_PARSE_UUID)";
const CH26_PARTITIONS = "Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100). The limit is controlled by 'max_partitions_per_insert_block' setting.";
const CH_TOO_MANY_PARTS = "Code: 252. DB::Exception: Too many parts (300 with average size of 1.00 MiB) in table 'telecom.cdr'. Merges are processing significantly slower than inserts. (TOO_MANY_PARTS)";

test.each([
  ["18.16 FixedString overflow", CH18_FIXED_STRING, "data", 1, "f"],
  ["18.16 unknown Enum name (code 49)", CH18_ENUM, "data", null, null],
  ["18.16 unparseable DateTime", CH18_DATETIME, "data", 3, "d"],
  ["18.16 text that is not like the type", CH18_NOT_LIKE, "data", 2, "d"],
  ["26.9 unknown Enum name", CH26_ENUM, "data", 2, "s"],
  ["26.9 unparseable UUID", CH26_UUID, "data", 1, null],
  ["26.9 too many partitions in one block", CH26_PARTITIONS, "shape", null, null],
  ["overload: too many parts", CH_TOO_MANY_PARTS, "transient", null, null],
  ["memory limit", "Code: 241. DB::Exception: Memory limit (total) exceeded", "transient", null, null],
  ["server timeout", "Code: 159. DB::Exception: Timeout exceeded: elapsed 10 seconds", "transient", null, null],
  ["unknown table", "Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist., e.what() = DB::Exception\n", "permanent", null, null],
  ["authentication", "Code: 516. DB::Exception: default: Authentication failed", "permanent", null, null],
  ["a code this table does not know", "Code: 9999. DB::Exception: something new", "transient", null, null],
] as const)("%s: classified with its row and column", (_n, message, kind, row, column) => {
  const e = classifyInsertError(new Error(message), "insert of 3 rows");
  expect([e.kind, e.row, e.column]).toEqual([kind, row, column]);
  expect(e.retryable).toBe(kind === "transient");
  expect(e.message.startsWith("insert of 3 rows: Code: ")).toBe(true);
  expect(e.message).not.toContain("\n");
});

test.each([
  ["connection refused", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8124"), { code: "ECONNREFUSED" })],
  ["socket reset", Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })],
  ["client timeout", new Error("Timeout error.")],
  ["a 502 from a proxy with no ClickHouse code", new Error("<html>502 Bad Gateway</html>")],
])("no ClickHouse answer (%s) → transient, retryable", (_n, cause) => {
  const e = classifyInsertError(cause, "insert");
  expect(e.kind).toBe("transient");
  expect(e.retryable).toBe(true);
  expect(e.serverCode).toBeNull();
  expect(e.cause).toBe(cause);
});
