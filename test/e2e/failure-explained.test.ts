// A test that fails beside a worker says why in the test command's output: the failure carries the
// worker's stats then and its own last log lines (explainedBy), while the whole log stays in its
// file under .local/test-logs/. Here an assertion fails on purpose inside explainedBy, and the error
// bun prints for it is read back.
import { expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { e2eScope } from "../support/e2e.ts";
import { explainedBy, startWorker, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();

test("a failing assertion beside a worker shows the worker's own log lines and stats, and names its whole log", async () => {
  const n = await names("explained");
  const w = await startWorker(workerEnv(n));
  let shown = "";
  try {
    await explainedBy(w, async () => {
      expect("the record's row").toBe("deliberately another");
    });
  } catch (e) {
    shown = (e as Error).message;
  } finally {
    // Killed, as a failed test's worker is: its log file is kept.
    await w.stop("SIGKILL");
  }
  expect(shown).toContain("deliberately another");
  expect(shown).toContain(`worker log (its own last 20 lines; all of it in ${w.logFile}):`);
  // Its own lines, as it wrote them: the start line with its group.
  const own = shown.split("\n").filter((l) => l.startsWith("{"));
  expect(own.some((l) => JSON.parse(l).msg === "cdr-worker running")).toBe(true);
  expect(own.every((l) => !l.includes('"component":"librdkafka"'))).toBe(true);
  expect(shown).toMatch(/last stats: \{"state":"\w+","total_consumed":0,/);
  expect(existsSync(w.logFile)).toBe(true);
  expect(readFileSync(w.logFile, "utf8")).toContain('"msg":"cdr-worker running"');
});
