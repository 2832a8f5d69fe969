#!/usr/bin/env bun
/**
 * Writes docs/configuration.md from src/config.ts, the one table of variables: each one's default,
 * range or choices (read from its valibot schema) and help line, then the Kafka properties the
 * worker sets itself and those it refuses. test/docs/configuration.test.ts holds the page equal to
 * what this prints, so the page cannot drift from the code.
 *   bun scripts/docs/configuration.ts            (writes the page)
 *   bun scripts/docs/configuration.ts --stdout   (prints it)
 */
import { writeFileSync } from "node:fs";
import { EXACTLY_ONCE_KAFKA_PROPS, RESERVED_KAFKA_PROPS, VARIABLES } from "../../src/config.ts";

/** librdkafka properties the worker sets itself, and why (src/kafka/consumer.ts, producer.ts, cli/pipeline.ts). */
export const SET_BY_WORKER: ReadonlyArray<[string, string, string]> = [
  ["auto.offset.reset", "earliest", "consumer: a new group reads the raw topic from its first record; a KAFKA_PROP_ may change it"],
  ["enable.auto.commit", "false", "consumer: offsets are committed only once ClickHouse or the DLQ acknowledged (refused as KAFKA_PROP_)"],
  ["enable.auto.offset.store", "false", "consumer: likewise (refused as KAFKA_PROP_)"],
  ["queued.max.messages.kbytes", "4096", "consumer: the prefetch queue, the one buffer the worker does not size itself"],
  ["fetch.queue.backoff.ms", "10", "consumer: how soon a full prefetch queue is looked at again"],
  ["group.id", "KAFKA_GROUP_ID", "consumer (refused as KAFKA_PROP_)"],
  ["client.id", "WORKER_INSTANCE", "consumer and producer"],
  ["enable.idempotence", "true", "DLQ producer: no envelope written twice by a retry (refused as KAFKA_PROP_ under exactly-once)"],
  ["linger.ms", "5", "DLQ producer"],
  [
    "transactional.id",
    "<KAFKA_GROUP_ID>-<WORKER_INSTANCE>",
    "DLQ producer under exactly-once: envelopes and commits in one transaction (refused as KAFKA_PROP_ under exactly-once)",
  ],
  [
    "transaction.timeout.ms",
    "10000",
    "DLQ producer under exactly-once: how long a dead owner's open transaction holds its successor's read of the committed offsets; a KAFKA_PROP_ may change it",
  ],
];

type Schema = { type?: string; pipe?: Schema[]; options?: string[]; requirement?: unknown; wrapped?: Schema };

/** The values a variable takes, read from its schema: a range, a list of choices, or a kind. */
function accepted(schema: Schema): string {
  if (schema.type === "picklist") return schema.options!.map((o) => `\`${o}\``).join(", ");
  const steps = schema.pipe ?? [];
  const min = steps.find((s) => s.type === "min_value")?.requirement;
  const max = steps.find((s) => s.type === "max_value")?.requirement;
  if (min !== undefined && max !== undefined) {
    const whole = steps.some((s) => s.type === "regex" && String((s as { requirement: RegExp }).requirement) === String(/^\d+$/));
    return `${whole ? "whole number" : "number"} ${min} … ${max}`;
  }
  return "text";
}

export function configurationPage(): string {
  const vars = VARIABLES as unknown as Record<string, { schema: Schema; default?: string; help?: string }>;
  const rows = Object.entries(vars).map(
    ([name, s]) => `| \`${name}\` | ${s.default ? `\`${s.default}\`` : "—"} | ${accepted(s.schema)} | ${(s.help ?? "").replaceAll("|", "\\|")} |`,
  );
  return `# Configuration

Every variable the worker reads, generated from \`src/config.ts\` by \`bun scripts/docs/configuration.ts\`
(\`test/docs/configuration.test.ts\` keeps this page equal to the code). A bad value stops the worker at
start with one line a variable (\`config error: NAME="value": expected …\`, secrets shown as
\`[redacted]\`) and exit 2. A variable with a secret can be read from a file instead:
\`CLICKHOUSE_PASSWORD_FILE\`, \`KAFKA_PROP_<NAME>_FILE\` (not with the plain one too).

| variable | default | accepts | what it sets |
| --- | --- | --- | --- |
${rows.join("\n")}
| \`KAFKA_PROP_<NAME>\` | — | text | any librdkafka property: \`_\` → \`.\`, \`__\` → \`_\`, \`___\` → \`-\`, lower-cased (\`KAFKA_PROP_SECURITY_PROTOCOL=SASL_SSL\` → \`security.protocol\`); librdkafka checks each at start |

## Kafka properties the worker sets itself

| property | value | why |
| --- | --- | --- |
${SET_BY_WORKER.map(([p, v, why]) => `| \`${p}\` | \`${v}\` | ${why} |`).join("\n")}

The offset reset default is \`earliest\`: a new consumer group (or one whose committed offsets expired)
starts at the first record the raw topic holds, so nothing is skipped; \`KAFKA_PROP_AUTO_OFFSET_RESET=latest\`
changes that.

## Kafka properties refused as \`KAFKA_PROP_*\`

| property | why |
| --- | --- |
${Object.entries(RESERVED_KAFKA_PROPS).map(([p, why]) => `| \`${p}\` | ${why} |`).join("\n")}
${Object.entries(EXACTLY_ONCE_KAFKA_PROPS).map(([p, why]) => `| \`${p}\` | with \`DELIVERY=exactly-once\` only: ${why} |`).join("\n")}
`;
}

if (import.meta.main) {
  const page = configurationPage();
  if (process.argv.includes("--stdout")) process.stdout.write(page);
  else writeFileSync(new URL("../../docs/configuration.md", import.meta.url), page);
}
