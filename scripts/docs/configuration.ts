#!/usr/bin/env bun
/**
 * Writes docs/configuration.md from src/config.ts, the one table of variables: each one's default,
 * range or choices (read from its valibot schema) and help line, then the Kafka properties the
 * worker sets itself and those it refuses. test/docs/configuration.test.ts holds the page equal to
 * what this prints, so the page cannot drift from the code.
 *   bun scripts/docs/configuration.ts            (writes the page)
 *   bun scripts/docs/configuration.ts --stdout   (prints it)
 */
import { readFileSync, writeFileSync } from "node:fs";
import { KAFKA_CLIENTS, type KafkaClient } from "../../src/cli/kafka-clients.ts";
import { EXACTLY_ONCE_KAFKA_PROPS, FILE_FORMS, kafkaProps, loadConfig, RESERVED_KAFKA_PROPS, VARIABLES, type Config } from "../../src/config.ts";
import { consumerProperties } from "../../src/kafka/consumer.ts";
import { handleProperties } from "../../src/kafka/handle.ts";
import { producerProperties } from "../../src/kafka/producer.ts";

/** Why each property a client sets (src/cli/kafka-clients.ts, src/kafka/{consumer,producer,handle}.ts). */
export const WHY: Readonly<Record<string, string>> = {
  "group.id": "the consumer group; an ACL must allow each group named here (Read on the group)",
  "client.id": "names the client in the broker's logs, quotas and metrics",
  "auto.offset.reset": "a new group (or one whose offsets expired) reads from the first record, so nothing is skipped",
  "enable.auto.commit": "offsets are committed only once ClickHouse or the DLQ acknowledged",
  "enable.auto.offset.store": "likewise: only acknowledged offsets are stored",
  "queued.max.messages.kbytes": "the prefetch queue, the one buffer the worker does not size itself",
  "fetch.queue.backoff.ms": "how soon a full prefetch queue is looked at again",
  "receive.message.max.bytes":
    "the most a record batch decompresses to (lz4 as zstd): a batch past it is dead-lettered record by record",
  "fetch.max.bytes": "a fetch response stays below receive.message.max.bytes, as librdkafka requires",
  "enable.idempotence": "no message written twice by a retry",
  "linger.ms": "how long a message waits for others to share its request",
  "message.max.bytes": "an envelope up to the DLQ topic's `max.message.bytes`, plus headers and framing",
  "transactional.id": "envelopes and the group's commit in one transaction, fenced by the group's generation",
  "transaction.timeout.ms": "how long a dead owner's open transaction holds its successor's read of the committed offsets",
  "heartbeat.interval.ms":
    "exactly-once, classic protocol: a worker that has just joined inserts once its first heartbeat is proven, within about 1 s",
  "statistics.interval.ms":
    "exactly-once: the membership lease is proven by heartbeats read from the statistics (0.23 s divides none of the usual heartbeat intervals)",
  "enable.partition.eof": "a read ends at each partition's end as the fetcher reports it, never after a quiet spell",
  "isolation.level": "an aborted transaction's envelopes and records were never delivered",
  "batch.num.messages": "synthetic traffic in large batches",
  "compression.type": "as the raw topic stores it",
  "log.queue": "librdkafka's logs reach the worker on its own thread; callbacks on librdkafka's threads crash",
};

type ClientName = keyof typeof KAFKA_CLIENTS;
/** Stands for the part of a group name that differs per run: an ACL allows it by prefix. */
const UNIQUE = "<unique>";

function symbolicConfig(delivery: string, props: Record<string, string> = {}): Config {
  const cfg = loadConfig({
    KAFKA_GROUP_ID: "<KAFKA_GROUP_ID>",
    WORKER_INSTANCE: "<WORKER_INSTANCE>",
    DELIVERY: delivery,
    DLQ_PROVENANCE: "unsigned",
  });
  return { ...cfg, kafka: { ...cfg.kafka, props } };
}

/** What librdkafka gets from a client: the worker's properties, the class defaults, the handle's. */
function effective(client: ClientName, cfg: Config): Record<string, string> {
  const c = KAFKA_CLIENTS[client] as KafkaClient;
  const own = kafkaProps(cfg, c.sets(cfg, UNIQUE));
  delete own["bootstrap.servers"];
  const typed = c.type === "consumer" ? consumerProperties(own) : c.type === "producer" ? producerProperties(own) : own;
  return handleProperties(typed);
}

/** Whether KAFKA_PROP_<name> changes what the client gets, measured on the code that builds it. */
function operatorWins(client: ClientName, property: string): string {
  if (property in RESERVED_KAFKA_PROPS) return "refused";
  const sentinel = "\u0000operator";
  const wins = effective(client, symbolicConfig("exactly-once", { [property]: sentinel }))[property] === sentinel;
  if (property in EXACTLY_ONCE_KAFKA_PROPS) return wins ? "refused under exactly-once" : "no";
  return wins ? "yes" : "no";
}

export interface SetRow {
  property: string;
  value: string;
  clients: ClientName[];
  /** Only under DELIVERY=exactly-once. */
  exactlyOnce: boolean;
  operator: string;
}

/** Every property a client of the worker's sets, grouped by value: read from the code, never typed. */
export function setByWorker(): SetRow[] {
  const rows = new Map<string, SetRow>();
  for (const client of Object.keys(KAFKA_CLIENTS) as ClientName[]) {
    const atLeastOnce = effective(client, symbolicConfig("at-least-once"));
    for (const [property, value] of Object.entries(effective(client, symbolicConfig("exactly-once")))) {
      const key = `${property}\u0000${value}`;
      const row = rows.get(key) ?? {
        property,
        value,
        clients: [],
        exactlyOnce: atLeastOnce[property] !== value,
        operator: operatorWins(client, property),
      };
      row.clients.push(client);
      rows.set(key, row);
    }
  }
  return [...rows.values()].sort((a, b) => a.property.localeCompare(b.property) || a.value.localeCompare(b.value));
}

export function kafkaClientsSection(why: Readonly<Record<string, string>> = WHY): string {
  const all = Object.keys(KAFKA_CLIENTS).length;
  const clients = Object.entries(KAFKA_CLIENTS as Record<string, KafkaClient>)
    .map(([name, c]) => `| \`${name}\` | ${c.type} | ${c.made} |`)
    .join("\n");
  const rows = setByWorker()
    .map((r) => {
      const eo = r.exactlyOnce ? " (exactly-once only)" : "";
      const who = r.clients.length === all ? "every client" : r.clients.map((c) => `\`${c}\``).join(", ");
      return `| \`${r.property}\` | \`${r.value}\`${eo} | ${who} | ${r.operator} | ${(why[r.property] ?? "").replaceAll("|", "\\|")} |`;
    })
    .join("\n");
  return `## Kafka properties the worker sets itself

Written from \`src/cli/kafka-clients.ts\`, the list every command builds its Kafka clients from, and
from the defaults of \`src/kafka/consumer.ts\`, \`producer.ts\` and \`handle.ts\`. \`KAFKA_BROKERS\` and
every \`KAFKA_PROP_*\` go to every client. "KAFKA_PROP_ wins" says, as measured on that code, whether
an operator's \`KAFKA_PROP_*\` replaces the worker's value. \`${UNIQUE}\` differs per run (process id
and start time): an ACL allows such a group by its prefix.

| client | type | made by |
| --- | --- | --- |
${clients}

| property | value | clients | KAFKA_PROP_ wins | why |
| --- | --- | --- | --- | --- |
${rows}`;
}

type Schema = {
  type?: string;
  pipe?: Schema[];
  options?: Array<string | Schema>;
  requirement?: unknown;
  message?: string;
  literal?: unknown;
};

/** What `text` (config.ts) says of itself: any non-empty value, shown as "text". */
const ANY_TEXT = "a non-empty string";

/** The values a variable takes, read from its schema: a range, a list of choices, what its checks say, or text. */
export function accepted(schema: Schema): string {
  if (schema.type === "picklist") return (schema.options as string[]).map((o) => `\`${o}\``).join(", ");
  if (schema.type === "literal") return schema.literal === "" ? "empty" : `\`${String(schema.literal)}\``;
  if (schema.type === "union") return schema.message ?? (schema.options as Schema[]).map(accepted).join(", or ");
  const steps = schema.pipe ?? [];
  const min = steps.find((s) => s.type === "min_value")?.requirement;
  const max = steps.find((s) => s.type === "max_value")?.requirement;
  if (min !== undefined && max !== undefined) {
    const whole = steps.some((s) => s.type === "regex" && String((s as { requirement: RegExp }).requirement) === String(/^\d+$/));
    return `${whole ? "whole number" : "number"} ${min} … ${max}`;
  }
  const said = steps.find((s) => ["regex", "check", "min_length"].includes(s.type ?? "") && s.message && s.message !== ANY_TEXT);
  return said?.message ?? "text";
}

/** A variable the image's Dockerfile sets (ENV), as it sets it. */
export function imageEnv(name: string, dockerfile = readFileSync(new URL("../../Dockerfile", import.meta.url), "utf8")): string {
  const m = new RegExp(`^ENV .*\\b${name}=(\\S+)`, "m").exec(dockerfile);
  if (!m) throw new Error(`the Dockerfile sets no ${name}`);
  return m[1]!;
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
\`[redacted]\`) and exit 2. A variable set to the empty string takes its default, as if unset.
A variable with a secret can be read from a file instead (not with the plain one too):
${FILE_FORMS.map((f) => `\`${f}_FILE\``).join(", ")}, \`KAFKA_PROP_<NAME>_FILE\`.

| variable | default | accepts | what it sets |
| --- | --- | --- | --- |
${rows.join("\n")}
| \`KAFKA_PROP_<NAME>\` | — | what librdkafka accepts | any librdkafka property: \`_\` → \`.\`, \`__\` → \`_\`, \`___\` → \`-\`, lower-cased (\`KAFKA_PROP_SECURITY_PROTOCOL=SASL_SSL\` → \`security.protocol\`); librdkafka checks each at start |

${kafkaClientsSection()}

The offset reset default is \`earliest\`: a new consumer group (or one whose committed offsets expired)
starts at the first record the raw topic holds, so nothing is skipped; \`KAFKA_PROP_AUTO_OFFSET_RESET=latest\`
changes that.

## Read by the runtime, not by the worker

| variable | the image sets | what it does |
| --- | --- | --- |
| \`BUN_JSC_forceRAMSize\` | \`${imageEnv("BUN_JSC_forceRAMSize")}\` | the JavaScript engine sizes its heap for this many bytes, not the host's RAM: every RSS figure and the memory bound assume it ([install](install.md)) |

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
