#!/usr/bin/env bun
/**
 * Writes docs/exit-codes.md from src/exits.ts, the closed list every exit goes through.
 * test/docs/exit-codes.test.ts holds the page equal to what this prints.
 *   bun scripts/docs/exit-codes.ts            (writes the page)
 *   bun scripts/docs/exit-codes.ts --stdout   (prints it)
 */
import { writeFileSync } from "node:fs";
import { EXITS, type ExitEntry } from "../../src/exits.ts";

const cell = (s: string) => s.replaceAll("|", "\\|");

export function exitCodesPage(exits: Record<string, ExitEntry> = EXITS): string {
  const rows = Object.entries(exits)
    .sort(([, a], [, b]) => a.code - b.code)
    .map(([name, e]) => `| **${e.code}** | \`${name}\` | ${cell(e.when)} | ${cell(e.says)} |`);
  return `# Exit codes

<!-- Generated from src/exits.ts by scripts/docs/exit-codes.ts; test/docs/exit-codes.test.ts holds it to the code. -->

Every command ends through one closed list in the code (\`src/exits.ts\`); this page is written from
it. The codes keep one meaning each, for a supervisor or a script:

- **0**: done.
- **2**: refused, and a restart alone cannot help: the command line, the configuration, the table
  or the grants must change first. One line a problem.
- **1**: anything else: a failure at start or while running (the log line names its \`code\`;
  [troubleshooting](troubleshooting.md) has each), a stop that could not finish, or an \`audit\`
  that found something. A supervisor restarts the worker on it.

| code | name | when | what it says last |
| --- | --- | --- | --- |
${rows.join("\n")}
`;
}

if (import.meta.main) {
  const page = exitCodesPage();
  if (process.argv.includes("--stdout")) process.stdout.write(page);
  else writeFileSync(new URL("../../docs/exit-codes.md", import.meta.url), page);
}
