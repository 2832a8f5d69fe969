// Guards the infrastructure: the Kafka broker that scripts/services.sh starts is real, speaks the
// protocol to librdkafka (kcat), and keeps topic configs. The project's own client has its own tests.
import { expect, setDefaultTimeout, test } from "bun:test";
import { KAFKA_BROKERS, ROOT, run, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const java = (main: string, ...args: string[]) =>
  run(["java", "-Xmx256m", "-cp", `${ROOT}/.local/kafka/libs/*`, main, ...args]);

test("Kafka round trip with kcat on an LZ4 topic, config read back with the broker's own tool", async () => {
  const topic = uniqueName("infra_rt");
  await java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", KAFKA_BROKERS, "--create", "--topic", topic,
    "--partitions", "1", "--replication-factor", "1", "--config", "compression.type=lz4");
  try {
    const lines = Array.from({ length: 100 }, (_, i) => `message-${i}`);
    await run(["kcat", "-b", KAFKA_BROKERS, "-P", "-t", topic, "-z", "lz4"], lines.join("\n") + "\n");
    const got = await run(["kcat", "-b", KAFKA_BROKERS, "-C", "-t", topic, "-o", "beginning", "-c", "100", "-e", "-q"]);
    expect(got.trim().split("\n")).toEqual(lines);
    const described = await java("kafka.admin.ConfigCommand", "--bootstrap-server", KAFKA_BROKERS,
      "--describe", "--entity-type", "topics", "--entity-name", topic);
    expect(described).toContain("compression.type=lz4");
  } finally {
    await java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", KAFKA_BROKERS, "--delete", "--topic", topic);
  }
});
