// The operator pages say what the worker does; how each claim is tested lives in docs/development.md,
// so an operator reads no test file names, and the table of what holds them names only real files.
import { expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const OPERATOR_PAGES = [
  "install", "production", "sizing", "security", "dlq", "upgrade", "operations", "runbooks", "troubleshooting",
].map((name) => `docs/${name}.md`);

/** What of a page a reader sees: HTML comments (the generated pages' provenance) are not. */
const readable = (file: string) => readFileSync(join(ROOT, file), "utf8").replace(/<!--[\s\S]*?-->/g, "");

/** The lines of a page that name a test file, the suite or CI. */
function testNarration(text: string): string[] {
  const narrating = /`test\/|\btest\/[\w-]+\/|\bCI\b|\.ci\/run|\bthe (test )?suite\b|\btest machine\b/;
  return text.split("\n").filter((line) => narrating.test(line));
}

test("the narration check finds a test path, CI and the suite, and passes a page that names none", () => {
  expect(testNarration("held by `test/e2e/tls.test.ts`.\nCI runs it.\nthe suite renders them\nplain")).toHaveLength(3);
  expect(testNarration("`cdr-worker audit` reports it; a test topic is any topic.")).toEqual([]);
});

test("no operator page narrates how it was tested: no test file, no CI, no suite", () => {
  const found = OPERATOR_PAGES.flatMap((page) => testNarration(readable(page)).map((line) => `${page}: ${line}`));
  expect(found).toEqual([]);
});

test("every test and script path docs/development.md names exists", () => {
  const text = readable("docs/development.md");
  const paths = [...text.matchAll(/`((?:test|scripts)\/[\w./-]+)`/g)].map((m) => m[1]!.replace(/\/$/, ""));
  expect(paths.length).toBeGreaterThan(20);
  expect(paths.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
});
