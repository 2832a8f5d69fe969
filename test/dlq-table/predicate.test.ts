// The --where grammar: what it takes, what it refuses (with where), and that the SQL sent is
// written from the parsed tree, so no text of the predicate's reaches ClickHouse unparsed (the
// fuzz target dlq-predicate holds it for any text).
import { expect, setDefaultTimeout, test } from "bun:test";
import { parsePredicate, predicateSql, MAX_PREDICATE_CHARS } from "../../src/dlq-table/predicate.ts";

setDefaultTimeout(60_000);

const sql = (text: string) => predicateSql(parsePredicate(text));

test("comparisons, IN, IS NULL, AND/OR/NOT and parentheses are written back with their precedence", () => {
  expect(sql("failure_reason = 'malformed_json'")).toBe("(failure_reason = 'malformed_json')");
  expect(sql("a_b = 1".replace("a_b", "dlq_offset"))).toBe("(dlq_offset = 1)");
  expect(sql("dlq_offset >= 10 AND dlq_offset < 20 OR failed_field IS NULL")).toBe(
    "(((dlq_offset >= 10) AND (dlq_offset < 20)) OR (failed_field IS NULL))",
  );
  expect(sql("NOT (stage = 'decode' OR stage <> 'x') and device_id not in ('a', 'b')")).toBe(
    "((NOT ((stage = 'decode') OR (stage <> 'x'))) AND (device_id NOT IN ('a', 'b')))",
  );
  expect(sql("attempts IS NOT NULL AND source_offset != -3 AND failed_at > '2026-01-01 00:00:00'")).toBe(
    "(((attempts IS NOT NULL) AND (source_offset != -3)) AND (failed_at > '2026-01-01 00:00:00'))",
  );
});

test("a string literal is quoted anew: quotes, backslashes and control characters cannot end it", () => {
  expect(sql("device_id = 'it''s'")).toBe("(device_id = 'it\\'s')");
  expect(sql("device_id = 'a\\'b'")).toBe("(device_id = 'a\\'b')");
  expect(sql("device_id = 'x\\\\'")).toBe("(device_id = 'x\\\\')");
  expect(sql("device_id = 'a\nb\u0000'")).toBe("(device_id = 'a\\x0ab\\x00')");
});

test("what is not the grammar is refused with its place: functions, subqueries, comments, statements, unknown names", () => {
  const refused: Array<[string, string]> = [
    ["1 = 1", "expected a column of the DLQ table, found \"1\" at character 1"],
    ["failure_reason = 'a'; DROP TABLE t", "unexpected \";\" at character 21"],
    ["failure_reason = 'a' OR sleep(3)", "\"sleep\" is not a column of the DLQ table at character 25"],
    ["stage = 'a' -- comment", "unexpected \"-\" at character 13"],
    ["(SELECT 1) = 1", "\"SELECT\" is not a column of the DLQ table at character 2"],
    ["stage = lower('A')", "expected a literal ('text', a number or NULL), found \"lower\" at character 9"],
    ["stage = 'open", "a string is not closed at character 9"],
    ["stage IN ()", "expected a literal ('text', a number or NULL), found \")\" at character 11"],
    ["", "empty at character 1"],
    ["stage =", "expected a literal ('text', a number or NULL) at character 8"],
    ["stage = 'a' stage = 'b'", "unexpected \"stage\" at character 13"],
  ];
  for (const [text, why] of refused) expect(() => parsePredicate(text)).toThrow(`--where: ${why}`);
  expect(() => parsePredicate("(".repeat(40) + "stage = 'a'" + ")".repeat(40))).toThrow("nested deeper than 32");
  expect(() => parsePredicate(`stage = '${"x".repeat(MAX_PREDICATE_CHARS)}'`)).toThrow("longer than");
});

test("number literals are written in decimal as every server reads them: 18.16 reads a leading zero as octal", () => {
  expect(predicateSql(parsePredicate("dlq_offset IN (010, 0, 000, 7)"))).toBe("(dlq_offset IN (10, 0, 0, 7))");
  expect(predicateSql(parsePredicate("attempts > -007.50"))).toBe("(attempts > -7.50)");
  expect(predicateSql(parsePredicate("dlq_offset = 00.5"))).toBe("(dlq_offset = 0.5)");
});
