// Classification of what each supported ClickHouse really answers: the bodies, status codes and
// exception-code headers in test/fixtures/clickhouse-errors.json were captured from ClickHouse
// 18.16 and from the test endpoint around ClickHouse 26.9's engine by
// scripts/clickhouse/capture-errors.ts. Each goes through the writer's reading of a refused insert
// and through @clickhouse/client's own parseError (what `command` and `query` throw).
import { parseError } from "@clickhouse/client";
import { expect, setDefaultTimeout, test } from "bun:test";
import { classifyInsertError, refusal } from "../../src/clickhouse/insert-error.ts";
import captured from "../fixtures/clickhouse-errors.json";
import { CURRENT_CONDITIONS } from "../fixtures/clickhouse-conditions.ts";

setDefaultTimeout(60_000);

type Kind = "transient" | "condition" | "data" | "shape" | "configuration";
/** case → kind, and per server the row and column the writer reads from the whole answer. */
const EXPECTED: Record<string, { kind: Kind; "18.16"?: [number | null, string | null]; "26.9"?: [number | null, string | null] }> = {
  "unknown Enum name": { kind: "data", "18.16": [null, null], "26.9": [3, "rat"] },
  "row with a missing column": { kind: "data", "18.16": [1, null], "26.9": [1, null] },
  "value too long for FixedString": { kind: "data", "18.16": [2, "svc"], "26.9": [2, "svc"] },
  "CHECK constraint violated": { kind: "data", "26.9": [2, "svc"] },
  "unparseable DateTime": { kind: "data", "18.16": [2, "t"], "26.9": [2, "t"] },
  "too many partitions in one block": { kind: "shape", "26.9": [null, null] },
  "too many parts (merges slower than inserts)": { kind: "condition", "18.16": [null, null], "26.9": [null, null] },
  "insert over the memory limit": { kind: "shape", "18.16": [null, null], "26.9": [null, null] },
  "insert while the server is short of memory (total)": { kind: "condition", "18.16": [null, null] },
  "insert while the user is short of memory": { kind: "condition", "18.16": [null, null] },
  "too many simultaneous queries": { kind: "condition", "18.16": [null, null] },
  "unknown table": { kind: "configuration", "18.16": [null, null], "26.9": [null, null] },
  "unknown database": { kind: "configuration", "18.16": [null, null], "26.9": [null, null] },
  "wrong password": { kind: "configuration", "18.16": [null, null], "26.9": [null, null] },
  "readonly user": { kind: "configuration", "18.16": [null, null], "26.9": [null, null] },
};

test("the fixture holds every case from both servers, as captured", () => {
  const seen = new Set(captured.map((a) => `${a.server} ${a.case}`));
  for (const [name, e] of Object.entries(EXPECTED))
    for (const server of ["18.16", "26.9"] as const) expect(seen.has(`${server} ${name}`)).toBe(e[server] !== undefined);
  for (const a of captured) expect(a.version.startsWith(a.server)).toBe(true);
  // Current servers name the code in a header and end the text with its name; 18.16 does neither.
  for (const a of captured.filter((a) => a.server === "26.9")) expect(a.body).toMatch(/\([A-Z_]+\) \(version 26\.9\.[\d.]+\)\n$/);
  for (const a of captured.filter((a) => a.server === "18.16")) expect(a.exceptionCode).toBeNull();
});

test.each(captured.map((a) => [`${a.server}: ${a.case}`, a] as const))("%s: classified alike from the whole answer and from the client's parseError", (_n, a) => {
  const want = EXPECTED[a.case]!;
  const headers = a.exceptionCode === null ? {} : { "x-clickhouse-exception-code": a.exceptionCode };
  const whole = classifyInsertError(refusal(a.status, headers, a.body), "insert of 4 rows");
  const parsed = classifyInsertError(parseError(a.body), "insert of 4 rows");
  expect(whole.kind).toBe(want.kind);
  expect(parsed.kind).toBe(want.kind);
  expect([whole.row, whole.column]).toEqual(want[a.server as "18.16" | "26.9"]!);
  expect(whole.serverCode).toBe(Number(/Code: (\d+)/.exec(a.body)![1]));
  expect(parsed.serverCode).toBe(whole.serverCode);
  if (a.server === "26.9") expect(parsed.serverType).toBe(whole.serverType!);
  expect(whole.retryable).toBe(want.kind !== "data" && want.kind !== "shape");
  expect(whole.message).toMatch(/^insert of 4 rows: Code: \d+/);
  expect(whole.message).not.toContain("\n");
});

test("the client's own parseError keeps neither the row nor the column of a current server's refusal: the writer reads the whole answer", () => {
  const a = captured.find((x) => x.server === "26.9" && x.case === "value too long for FixedString")!;
  const parsed = classifyInsertError(parseError(a.body), "insert");
  expect([parsed.row, parsed.column]).toEqual([null, null]);
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


test.each(CURRENT_CONDITIONS.map(([n, code, text]) => [n, code, text] as const))(
  "a current server's condition (%s) is a condition: retryable, its code kept, never split",
  (_n, code, text) => {
    const body = `Code: ${code}. DB::Exception: ${text} (version 26.9.2.1)\n`;
    const whole = classifyInsertError(refusal(500, { "x-clickhouse-exception-code": String(code) }, body), "insert of 4 rows");
    const parsed = classifyInsertError(parseError(body), "insert of 4 rows");
    for (const e of [whole, parsed]) {
      expect(e.kind).toBe("condition");
      expect(e.retryable).toBe(true);
      expect(e.serverCode).toBe(code);
    }
    // Refused before it runs, nothing can be stored; elsewhere part of a body may be.
    expect(whole.mayHaveStored).toBe(code !== 202);
  },
);

test.each([
  ["18.16", "Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded: would use 2.50 MiB, maximum: 976.56 KiB, e.what() = DB::Exception\n"],
  ["current", "Code: 241. DB::Exception: Query memory limit exceeded: would use 6.01 MiB (attempt to allocate chunk of 6.01 MiB), maximum: 976.56 KiB. (MEMORY_LIMIT_EXCEEDED) (version 26.9.2.1)\n"],
  ["between", "Code: 241. DB::Exception: (for query) memory limit exceeded: would use 6.01 MiB, maximum: 976.56 KiB. (MEMORY_LIMIT_EXCEEDED) (version 23.3.1.1)\n"],
])("only the query's own memory limit (%s) is the body's size: split", (_n, body) => {
  expect(classifyInsertError(parseError(body), "insert").kind).toBe("shape");
});
