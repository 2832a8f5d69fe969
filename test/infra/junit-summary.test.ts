// The test command's verdict (scripts/lib/junit-summary.py) over the JUnit reports of its passes.
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const report = (cases: string) => `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="s">${cases}</testsuite></testsuites>`;

function summary(...args: string[]) {
  const p = Bun.spawnSync(["python3", `${ROOT}/scripts/lib/junit-summary.py`, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, lines: `${p.stdout}`.trim().split("\n") };
}

test("every pass counted: the failed test named with its first lines, then N passed, M failed", () => {
  const dir = mkdtempSync(join(tmpdir(), "junit-"));
  writeFileSync(join(dir, "junit.xml"), report(`<testcase name="a"/><testcase name="b" classname="c"><failure message="boom">line one\n\nline two</failure></testcase>`));
  writeFileSync(join(dir, "junit.serial.xml"), report(`<testcase name="d"/><testcase name="e"><skipped/></testcase>`));
  const s = summary(join(dir, "junit.xml"), join(dir, "junit.serial.xml"));
  expect(s.code).toBe(1);
  expect(s.lines).toEqual([`FAILED c > b (${join(dir, "junit.xml")})`, "    boom", "    line one", "    line two", "2 passed, 1 failed"]);
  expect(summary("--totals", join(dir, "junit.serial.xml"))).toEqual({ code: 0, lines: ["1 passed, 0 failed"] });
});

test("no report, or one that does not parse, is a failure: nothing ran that could pass", () => {
  expect(summary()).toEqual({ code: 1, lines: ["no JUnit report was written", "0 passed, 1 failed"] });
  const dir = mkdtempSync(join(tmpdir(), "junit-"));
  writeFileSync(join(dir, "junit.xml"), "<testsuites><testcase");
  const s = summary(join(dir, "junit.xml"));
  expect(s.code).toBe(1);
  expect(s.lines.at(-1)).toBe("0 passed, 1 failed");
});
