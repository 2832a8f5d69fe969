// docs/internals.md read in one sitting: each section opens with its table or a summary of at most
// five lines, the exactly-once section stays within 175 lines, and every path it names exists, so
// each claim still stands beside the code that keeps it and the test that holds it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const TEXT = readFileSync(`${ROOT}/docs/internals.md`, "utf8");

/** Each `### ` section: its title and its lines, up to the next one. */
function sections(text: string): Array<{ title: string; lines: string[] }> {
  return text
    .split(/^### /m)
    .slice(1)
    .map((s) => {
      const lines = s.replace(/\n+$/, "").split("\n");
      return { title: lines[0]!, lines: lines.slice(1) };
    });
}

/** The first block of a section: its opening table, list, or paragraph, as lines. */
function openingBlock(lines: readonly string[]): string[] {
  const start = lines.findIndex((l) => l.trim() !== "");
  if (start < 0) return [];
  const end = lines.findIndex((l, i) => i > start && l.trim() === "");
  return lines.slice(start, end < 0 ? lines.length : end);
}

test("every section of docs/internals.md opens with its table or a summary of at most five lines", () => {
  const all = sections(TEXT);
  expect(all.length).toBeGreaterThan(10);
  const long = all
    .map(({ title, lines }) => ({ title, block: openingBlock(lines) }))
    .filter(({ block }) => !block[0]?.startsWith("|") && block.length > 5)
    .map(({ title, block }) => `${title}: ${block.length} lines`);
  expect(long).toEqual([]);
});

test("the opening check can fail: a six-line paragraph is no summary", () => {
  const block = openingBlock(["", "a", "b", "c", "d", "e", "f", "", "g"]);
  expect(block.length).toBe(6);
  expect(openingBlock(["", "| a |", "| --- |", "", "x"])[0]).toBe("| a |");
});

test("docs/internals.md's exactly-once section is at most 175 lines, and every path the page names exists", () => {
  const eo = sections(TEXT).find((s) => s.title === "Exactly-once");
  expect(eo).toBeDefined();
  expect(eo!.lines.length + 1).toBeLessThanOrEqual(175);
  const paths = [...TEXT.matchAll(/`((?:test|src|scripts)\/[^`\s]+)`/g)].map((m) => m[1]!);
  expect(paths.length).toBeGreaterThan(30);
  const missing = [...new Set(paths)].filter((p) => !existsSync(`${ROOT}/${p}`));
  expect(missing).toEqual([]);
});
