// docs/configuration.md is generated from src/config.ts (scripts/docs/configuration.ts) and must
// stay what the code gives, as the metrics list is held to a scrape.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { VARIABLES } from "../../src/config.ts";
import { configurationPage } from "../../scripts/docs/configuration.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("docs/configuration.md is what src/config.ts gives (regenerate: bun scripts/docs/configuration.ts)", () => {
  const page = readFileSync(`${ROOT}/docs/configuration.md`, "utf8");
  expect(page).toBe(configurationPage());
  for (const name of Object.keys(VARIABLES)) expect(page).toContain(`| \`${name}\` |`);
  expect(page).toContain("| `PHONE_CACHE_SIZE` | `50000` | whole number");
  expect(page).toContain("| `CH_UNREACHABLE_POLICY` | `dlq` | `dlq`, `wait` |");
});
