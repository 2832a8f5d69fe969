// Prints what the replay check's offset lookups answer for a topic and group, in a process of its
// own: the library (LIBRDKAFKA_PATH or the pinned build) is loaded once per process.
// Usage: bun test/support/lookup-probe.ts <brokers> <topic> <group> <timestamp-ms>
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { librdkafkaVersion, rdkLookups, setLibrdkafkaPath } from "../../src/kafka/native.ts";
import { offsetLookup } from "../../src/kafka/offset-lookup.ts";

const [brokers, topic, group, at] = process.argv.slice(2) as [string, string, string, string];
if (process.env.LIBRDKAFKA_PATH) setLibrdkafkaPath(process.env.LIBRDKAFKA_PATH);
const props = { "bootstrap.servers": brokers };
const admin = new Admin(props);
const consumer = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
const lookup = offsetLookup(admin, consumer);
const tps = [0, 1].map((partition) => ({ topic, partition }));
const out = {
  version: librdkafkaVersion(),
  admin_api: rdkLookups() !== null,
  committed: (await lookup.committed(group, tps)).map((c) => [c.partition, String(c.offset), c.metadata ?? null, c.err ?? 0]),
  earliest: [...(await lookup.listOffsets(topic, [0, 1], "earliest"))],
  latest: [...(await lookup.listOffsets(topic, [0, 1], "latest"))],
  by_time: [...(await lookup.listOffsets(topic, [0, 1], Number(at)))],
  partitions: await lookup.partitionCount(topic),
};
admin.close();
await consumer.close();
console.log(JSON.stringify(out));
