// Admin calls and `topics ensure` against the real broker.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Admin } from "../../src/kafka/admin.ts";
import { ensureTopics, minInsyncReplicas, topologySpec } from "../../src/topics/topology.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { createTopic, deleteTopics, props, withAdmin } from "../support/kafka.ts";
import { uniqueName, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

/**
 * Resolves once the brokers describe `key` of `topic` as `want`. Under KRaft an alter returns when
 * the controller has taken it, and a broker applies it from the metadata log a moment later: a
 * describe right after can still show the old value (seen on Kafka 4.4.0).
 */
const describedAs = (admin: Admin, topic: string, key: string, want: string) =>
  waitFor(async () => ((await admin.describeConfigs(topic))[key]?.value === want ? true : undefined), 10_000, `${topic} ${key}=${want}`);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

describe("admin and topology", () => {
  test("topics ensure twice is a no-op; describe shows the spec's settings; drift is repaired; partitions are never changed", async () => {
    const raw = uniqueName("cdr.raw");
    const dlq = uniqueName("cdr.raw.dlq");
    cleanup.push(raw, dlq);
    const specs = topologySpec(raw, dlq);
    await withAdmin(async (admin: Admin) => {
      expect((await ensureTopics(admin, specs)).map((r) => r.action)).toEqual(["created", "created"]);
      expect((await ensureTopics(admin, specs)).map((r) => r.action)).toEqual(["ok", "ok"]);
      expect(admin.partitionCounts([raw, dlq])).toEqual(new Map([[raw, 3], [dlq, 1]]));
      const rawCfg = await admin.describeConfigs(raw);
      expect([rawCfg["retention.ms"]!.value, rawCfg["compression.type"]!.value]).toEqual(["86400000", "lz4"]);
      expect((await admin.describeConfigs(dlq))["retention.ms"]!.value).toBe("604800000");
      // Drift: an operator changed retention and added an override of their own.
      await admin.alterConfigs(raw, { "retention.ms": "1000", "compression.type": "lz4", "max.message.bytes": "2000000" });
      await describedAs(admin, raw, "retention.ms", "1000");
      const [repaired] = await ensureTopics(admin, specs);
      expect(repaired).toMatchObject({ topic: raw, action: "repaired", repaired: { "retention.ms": "1000" } });
      await describedAs(admin, raw, "retention.ms", "86400000");
      const after = await admin.describeConfigs(raw);
      expect(after["retention.ms"]!.value).toBe("86400000");
      expect(after["max.message.bytes"]!.value).toBe("2000000");
      // With keepConfigs an operator's retention stays, reported as differing from the spec.
      await admin.alterConfigs(raw, { "retention.ms": "3600000", "compression.type": "lz4", "max.message.bytes": "2000000" });
      await describedAs(admin, raw, "retention.ms", "3600000");
      const [kept, dlqKept] = await ensureTopics(admin, specs, { keepConfigs: true });
      expect(kept).toMatchObject({ topic: raw, action: "kept", repaired: {}, differs: { "retention.ms": { spec: "86400000", actual: "3600000" } } });
      expect(dlqKept!.action).toBe("ok");
      expect((await admin.describeConfigs(raw))["retention.ms"]!.value).toBe("3600000");
      // A dry run says what a run would repair, with the current value, and changes nothing.
      const [wouldRepair] = await ensureTopics(admin, specs, { dryRun: true });
      expect(wouldRepair).toMatchObject({ topic: raw, action: "would-repair", repaired: { "retention.ms": "3600000" } });
      expect((await admin.describeConfigs(raw))["retention.ms"]!.value).toBe("3600000");
    });
  });

  test("topics ensure asked for 3 replicas over topics made with 1: min.insync.replicas follows the topics' own factor, the mismatch is reported, writes go on", async () => {
    const raw = uniqueName("cdr.raw.rf");
    const dlq = uniqueName("cdr.raw.rf.dlq");
    cleanup.push(raw, dlq);
    await withAdmin(async (admin: Admin) => {
      await ensureTopics(admin, topologySpec(raw, dlq));
      expect(admin.topicShapes([raw])).toEqual(new Map([[raw, { partitions: 3, replicas: 1 }]]));
      const asked = topologySpec(raw, dlq, { replicationFactor: 3 });
      const reports = await ensureTopics(admin, asked);
      expect(reports.map((r) => [r.action, r.replicationMismatch])).toEqual([
        ["ok", { expected: 3, actual: 1 }],
        ["ok", { expected: 3, actual: 1 }],
      ]);
      expect((await admin.describeConfigs(dlq))["min.insync.replicas"]?.value).not.toBe("2");
      // What the command without this reading left behind: 2 on a one-replica topic, repaired to 1.
      await admin.alterConfigs(dlq, { "retention.ms": "604800000", "max.message.bytes": String(8 << 20), "min.insync.replicas": "2" });
      await describedAs(admin, dlq, "min.insync.replicas", "2");
      const [, repaired] = await ensureTopics(admin, asked);
      expect(repaired).toMatchObject({ topic: dlq, action: "repaired", repaired: { "min.insync.replicas": "2" } });
      await describedAs(admin, dlq, "min.insync.replicas", "1");
    });
    // An acks=all write (the DLQ producer's, through idempotence) goes through.
    const p = new Producer(props);
    try {
      await p.produce(dlq, "x", { partition: 0 });
    } finally {
      p.close();
    }
  });

  test("topics ensure --dry-run on missing topics: what it would create, and nothing created", async () => {
    const raw = uniqueName("cdr.raw.dry");
    const dlq = uniqueName("cdr.raw.dry.dlq");
    cleanup.push(raw, dlq);
    await withAdmin(async (admin: Admin) => {
      const reports = await ensureTopics(admin, topologySpec(raw, dlq), { dryRun: true });
      expect(reports.map((r) => [r.topic, r.action])).toEqual([[raw, "would-create"], [dlq, "would-create"]]);
      expect(admin.partitionCounts([raw, dlq])).toEqual(new Map([[raw, null], [dlq, null]]));
    });
  });

  test("topics ensure returns once every partition it created answers from its leader (a worker started right after finds them serving)", async () => {
    const raw = uniqueName("cdr.raw.serving");
    const dlq = uniqueName("cdr.raw.serving.dlq");
    cleanup.push(raw, dlq);
    await withAdmin((admin) => ensureTopics(admin, topologySpec(raw, dlq, { partitions: 8 })));
    // One ListOffsets per partition, first try, from a client that has never seen the topics.
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("probe") }, topics: [] });
    try {
      const probe = (topic: string, partition: number) => {
        try {
          return c.queryWatermarks(topic, partition, 3000).high;
        } catch (e) {
          return (e as Error).message;
        }
      };
      expect([...Array.from({ length: 8 }, (_, p) => probe(raw, p)), probe(dlq, 0)]).toEqual(Array(9).fill(0));
    } finally {
      await c.close();
    }
  });

  test("a partition count that differs is reported, not changed", async () => {
    const raw = await createTopic("cdr.raw.small", 2);
    const dlq = uniqueName("dlq");
    cleanup.push(raw, dlq);
    await withAdmin(async (admin) => {
      const [r] = await ensureTopics(admin, topologySpec(raw, dlq));
      expect(r!.partitionMismatch).toEqual({ expected: 3, actual: 2 });
      expect(admin.partitionCounts([raw]).get(raw)).toBe(2);
    });
  });

  test("a replication factor the cluster cannot hold fails naming the cause, and creates nothing", async () => {
    const raw = uniqueName("cdr.raw.rf3");
    const dlq = uniqueName("cdr.raw.rf3.dlq");
    cleanup.push(raw, dlq);
    await withAdmin(async (admin) => {
      const err = await ensureTopics(admin, topologySpec(raw, dlq, { replicationFactor: 3 })).catch((e) => e as Error);
      expect(String(err)).toContain("INVALID_REPLICATION_FACTOR");
      expect(admin.partitionCounts([raw, dlq])).toEqual(new Map([[raw, null], [dlq, null]]));
    });
  });
});

test("replicated topics require two in-sync replicas of three; a single replica keeps the broker default", () => {
  expect([1, 2, 3, 5].map(minInsyncReplicas)).toEqual([undefined, 1, 2, 2]);
  const [raw, dlq] = topologySpec("r", "d", { replicationFactor: 3, partitions: 12 });
  expect([raw!.partitions, raw!.replicationFactor, dlq!.partitions, dlq!.replicationFactor]).toEqual([12, 3, 1, 3]);
  expect([raw!.configs["min.insync.replicas"], dlq!.configs["min.insync.replicas"]]).toEqual(["2", "2"]);
  expect(Object.keys(topologySpec("r", "d")[0]!.configs)).not.toContain("min.insync.replicas");
});
