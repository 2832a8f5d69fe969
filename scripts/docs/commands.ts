#!/usr/bin/env bun
/**
 * Writes docs/commands.md from the code: each command's help (src/cli/help.ts), its flags
 * (COMMAND_FLAGS in src/cli/args.ts) and the topics `topics ensure` makes (src/topics/topology.ts).
 * test/docs/commands.test.ts holds the page equal to what this prints.
 *   bun scripts/docs/commands.ts            (writes the page)
 *   bun scripts/docs/commands.ts --stdout   (prints it)
 */
import { writeFileSync } from "node:fs";
import { COMMAND_FLAGS, FLAG, type FlagSpecs } from "../../src/cli/args.ts";
import { HELP, SUMMARIES } from "../../src/cli/help.ts";
import { VARIABLES } from "../../src/config.ts";
import { topologySpec } from "../../src/topics/topology.ts";

const cell = (s: string) => s.replaceAll("|", "\\|");

function flagList(flags: FlagSpecs): string {
  const names = Object.entries(flags).map(([name, kind]) => (kind === FLAG.value ? `\`--${name} VALUE\`` : `\`--${name}\``));
  return names.length ? names.join(", ") : "none";
}

function topicsTable(): string {
  const [raw, dlq] = topologySpec(VARIABLES.KAFKA_TOPIC_RAW.default, VARIABLES.KAFKA_TOPIC_DLQ.default);
  const [raw3] = topologySpec(VARIABLES.KAFKA_TOPIC_RAW.default, VARIABLES.KAFKA_TOPIC_DLQ.default, { replicationFactor: 3 });
  const configs = (c: Record<string, string>) =>
    Object.entries(c)
      .map(([k, v]) => `\`${k}\` ${v}`)
      .join(", ");
  const extra = Object.fromEntries(Object.entries(raw3!.configs).filter(([k]) => !(k in raw!.configs)));
  return `| topic | partitions | configs |
| --- | --- | --- |
| \`${raw!.name}\` (\`KAFKA_TOPIC_RAW\`) | \`--partitions\` (${raw!.partitions}): the most workers one group can use | ${configs(raw!.configs)} |
| \`${dlq!.name}\` (\`KAFKA_TOPIC_DLQ\`) | ${dlq!.partitions} | ${configs(dlq!.configs)} |

Both get \`--replication-factor\` (${raw!.replicationFactor}); from 2 replicas also ${configs(extra)} at 3 replicas (1 at 2).`;
}

export function commandsPage(help: Record<string, string> = HELP, flags = COMMAND_FLAGS, summaries = SUMMARIES): string {
  const commands = Object.keys(summaries);
  const rows = commands.map(
    (c) => `| [\`${cell(summaries[c]!.usage)}\`](#${c}) | ${cell(summaries[c]!.summary)} | ${flagList(flags[c] ?? {})} |`,
  );
  const sections = commands.map(
    (c) => `## ${c}

\`\`\`text
${help[c]}
\`\`\`

Flags: ${flagList(flags[c] ?? {})}, and \`--help\`.`,
  );
  return `# Commands

<!-- Generated from src/cli/help.ts and src/cli/args.ts by scripts/docs/commands.ts; test/docs/commands.test.ts holds it to the code. -->

\`cdr-worker [command] [flags]\`; without a command, \`run\`. Every command reads the environment
([configuration](configuration.md)), and ends with a code of [exit codes](exit-codes.md). An unknown
flag, or a flag without its value, is a usage error (exit 2), never ignored. \`cdr-worker <command>
--help\` prints what each section below shows.

| command | what it does | flags |
| --- | --- | --- |
${rows.join("\n")}

${sections.join("\n\n")}

## The topics \`topics ensure\` makes

${topicsTable()}

On an existing topic \`topics ensure\` puts differing configs back to these (the report says
\`"action":"repaired"\` with the old values) and keeps every other override; with \`--keep-configs\`
it changes nothing and reports \`"action":"kept"\` with each differing key. compose's one-shot runs
\`topics ensure --keep-configs\`, so retention or limits an operator set survive every \`up\`.
`;
}

if (import.meta.main) {
  const page = commandsPage();
  if (process.argv.includes("--stdout")) process.stdout.write(page);
  else writeFileSync(new URL("../../docs/commands.md", import.meta.url), page);
}
