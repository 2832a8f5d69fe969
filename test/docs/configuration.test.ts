// docs/configuration.md is generated (scripts/docs/configuration.ts) from src/config.ts, from the one
// list every command builds its Kafka clients from (src/cli/kafka-clients.ts) and from the image's
// Dockerfile, and must stay what they give: each is shown to change the page when it changes.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { KAFKA_CLIENTS, clientProps } from "../../src/cli/kafka-clients.ts";
import { loadConfig, VARIABLES } from "../../src/config.ts";
import { accepted, configurationPage, imageEnv, kafkaClientsSection, setByWorker, WHY } from "../../scripts/docs/configuration.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const page = () => readFileSync(`${ROOT}/docs/configuration.md`, "utf8");

test("docs/configuration.md is what the code gives (regenerate: bun scripts/docs/configuration.ts)", () => {
  expect(page()).toBe(configurationPage());
  for (const name of Object.keys(VARIABLES)) expect(page()).toContain(`| \`${name}\` |`);
  expect(page()).toContain("| `PHONE_CACHE_SIZE` | `50000` | whole number");
  expect(page()).toContain("| `CH_UNREACHABLE_POLICY` | `dlq` | `dlq`, `wait` |");
  // Constraints as they are checked, not "text".
  expect(page()).toContain("| `CLICKHOUSE_URL` | `http://127.0.0.1:8123` | an http(s) URL, or several comma-separated |");
  expect(page()).toContain("| `DLQ_PROVENANCE_KEY` | — | empty, or at least 32 characters |");
  expect(page()).toContain("`DLQ_PROVENANCE_KEY_FILE`");
});

test("a changed client, check or image variable changes the page", () => {
  const consumer = KAFKA_CLIENTS.consumer as { sets: (...a: never[]) => Record<string, string> };
  const sets = consumer.sets;
  try {
    consumer.sets = (...a) => ({ ...sets(...a), "fetch.queue.backoff.ms": "11" });
    expect(configurationPage()).not.toBe(page());
  } finally {
    consumer.sets = sets;
  }
  expect(configurationPage()).toBe(page());
  expect(kafkaClientsSection({ ...WHY, "linger.ms": "changed" })).not.toBe(kafkaClientsSection());
  expect(accepted({ type: "union", options: [{ type: "literal", literal: "" }, { pipe: [{ type: "min_length", message: "at least 8 characters" }] }] })).toBe(
    "empty, or at least 8 characters",
  );
  expect(imageEnv("BUN_JSC_forceRAMSize", "FROM x\nENV BUN_JSC_forceRAMSize=2147483648 STATS_HOST=0.0.0.0\n")).toBe("2147483648");
});

test("the table lists what the clients get: the DLQ producer's name and limit, the check's group; every property has its why", () => {
  const rows = setByWorker();
  const row = (property: string, value: string) => rows.find((r) => r.property === property && r.value === value);
  expect(row("client.id", "<WORKER_INSTANCE>-dlq")?.clients).toEqual(["dlqProducer"]);
  expect(row("message.max.bytes", "8454144")?.clients).toEqual(["dlqProducer"]);
  expect(row("group.id", "<KAFKA_GROUP_ID>-replay-check")?.clients).toEqual(["replayCheckReader"]);
  expect(row("transactional.id", "<KAFKA_GROUP_ID>-<WORKER_INSTANCE>")).toMatchObject({ exactlyOnce: true, operator: "refused under exactly-once" });
  expect(row("enable.auto.commit", "false")?.operator).toBe("refused");
  expect(row("auto.offset.reset", "earliest")?.operator).toBe("yes");
  expect(Object.keys(WHY).sort()).toEqual([...new Set(rows.map((r) => r.property))].sort());
  // What a command really builds: the operator's property wins where the table says so.
  const cfg = loadConfig({ KAFKA_GROUP_ID: "g", WORKER_INSTANCE: "w", DLQ_PROVENANCE: "unsigned", KAFKA_PROP_LINGER_MS: "50" });
  expect(clientProps(cfg, "dlqProducer")).toMatchObject({ "client.id": "w-dlq", "linger.ms": "50", "transactional.id": "g-w" });
});

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = `${dir}/${f}`;
    return statSync(p).isDirectory() ? sources(p) : p.endsWith(".ts") ? [p] : [];
  });
}

test("no command builds a Kafka client outside the list: kafkaProps is called only by it, and where preflight reads the protocols the operator chose", () => {
  const calls = sources(`${ROOT}/src`).flatMap((file) =>
    readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => /\bkafkaProps\(/.test(l) && !/^\s*(\/\/|\*)/.test(l) && !/function kafkaProps/.test(l))
      .map((l) => `${file.slice(ROOT.length + 1)}: ${l.trim()}`),
  );
  expect(calls.sort()).toEqual([
    "src/cli/kafka-clients.ts: return kafkaProps(cfg, KAFKA_CLIENTS[client].sets(cfg, unique));",
    "src/cli/preflight.ts: cfg.delivery === \"exactly-once\" && usesConsumerProtocol(kafkaProps(cfg))",
    "src/cli/preflight.ts: const props = kafkaProps(cfg);",
  ]);
});
