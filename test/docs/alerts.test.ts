// docs/operations.md's table of alerts is generated from the rules file and stays what it says.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { withAlertsTable } from "../../scripts/docs/alerts.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("docs/operations.md lists every alert with the rules file's expression, duration and severity (regenerate: bun scripts/docs/alerts.ts)", () => {
  const page = readFileSync(`${ROOT}/docs/operations.md`, "utf8");
  expect(page).toBe(withAlertsTable(page));
  const rows = page.split("\n").filter((l) => /^\| CdrWorker\w+ \| (page|warning) \|/.test(l));
  expect(rows.length).toBe(21);
});
