// The librdkafka binding against the real broker.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { ensureTopics, topologySpec } from "../../src/topics/topology.ts";
import { committedOffsets, consumeN, createTopic, deleteTopics, header, props, text, withAdmin } from "../support/kafka.ts";
import { uniqueName, waitFor } from "../support/services.ts";

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

describe("producer and consumer", () => {
  test("round trip on an LZ4 topic: payload, key, headers, partition, offset, timestamp", async () => {
    const topic = await createTopic("rt", 1, { "compression.type": "lz4" });
    cleanup.push(topic);
    const p = new Producer(props);
    const before = Date.now();
    const d = await p.produce(topic, "hello", { key: "k1", headers: [["h1", "v1"], ["h2", new Uint8Array([0, 1, 2])]] });
    expect(d).toEqual({ partition: 0, offset: 0 });
    await p.produceBatch(topic, Array.from({ length: 999 }, (_, i) => `m${i}`));
    p.close();
    const msgs = await consumeN(topic, 1000);
    expect(text(msgs[0]!)).toBe("hello");
    expect(new TextDecoder().decode(msgs[0]!.key!)).toBe("k1");
    expect(header(msgs[0]!, "h1")).toBe("v1");
    expect([...msgs[0]!.headers!.find(([k]) => k === "h2")![1]]).toEqual([0, 1, 2]);
    expect(msgs[0]!.timestamp).toBeGreaterThanOrEqual(before - 1000);
    expect(msgs.map((m) => m.offset)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(text(msgs[999]!)).toBe("m998");
  });

  test("produce with headers survives payloads larger than its scratch arena and multi-byte text", async () => {
    const topic = await createTopic("arena", 1);
    cleanup.push(topic);
    const p = new Producer({ ...props, "message.max.bytes": "2000000" });
    const big = "é€".repeat(100_000); // 500 kB of UTF-8: the 64 KiB arena grows
    const values = ["small", big, "after the growth", new Uint8Array([0, 255, 7])];
    for (const [i, v] of values.entries()) await p.produce(topic, v, { key: `k${i}`, headers: [["h", `v${i}é`], ["bin", new Uint8Array([i, 0, 255])]] });
    p.close();
    const msgs = await consumeN(topic, values.length);
    expect(msgs.map((m) => m.value && Buffer.from(m.value).toString("utf8"))).toEqual(values.map((v) => (typeof v === "string" ? v : Buffer.from(v).toString("utf8"))));
    expect(msgs.map((m) => header(m, "h"))).toEqual(["v0é", "v1é", "v2é", "v3é"]);
    expect(msgs.map((m) => [...m.headers!.find(([k]) => k === "bin")![1]])).toEqual([[0, 0, 255], [1, 0, 255], [2, 0, 255], [3, 0, 255]]);
    expect(msgs.map((m) => new TextDecoder().decode(m.key!))).toEqual(["k0", "k1", "k2", "k3"]);
  });

  test("a delivery failure rejects its promise with librdkafka's error (topic does not exist, auto-creation off)", async () => {
    const p = new Producer({ ...props, "message.timeout.ms": "2000" });
    try {
      await expect(p.produce(uniqueName("missing"), "x")).rejects.toMatchObject({ code: "KAFKA_DELIVERY", kafkaName: expect.stringMatching(/UNKNOWN_TOPIC|MSG_TIMED_OUT/) });
    } finally {
      p.close();
    }
  });

  test("committed offsets survive a consumer restart: the new consumer resumes exactly there", async () => {
    const topic = await createTopic("resume", 1);
    cleanup.push(topic);
    const group = uniqueName("g");
    const p = new Producer(props);
    await p.produceBatch(topic, Array.from({ length: 100 }, (_, i) => `v${i}`));
    p.close();
    const c1 = new Consumer({ props: { ...props, "group.id": group }, topics: [topic] });
    const seen: number[] = [];
    await waitFor(async () => { seen.push(...c1.poll().map((m) => m.offset)); return seen.length >= 100 ? true : undefined; });
    const results = await c1.commit([{ topic, partition: 0, offset: 42n }]);
    expect(results).toEqual([{ topic, partition: 0, offset: 42n, err: 0 }]);
    c1.close();
    expect(committedOffsets(group, topic, 1).get(0)).toBe(42n);
    const c2 = new Consumer({ props: { ...props, "group.id": group }, topics: [topic] });
    const first = await waitFor(() => c2.poll()[0]);
    expect(first.offset).toBe(42);
    c2.close();
  });

  test("two consumers in one group split the partitions; the rebalance arrives as revoke then assign", async () => {
    const topic = await createTopic("split", 4);
    cleanup.push(topic);
    const group = uniqueName("g");
    const opts = { props: { ...props, "group.id": group, "session.timeout.ms": "6000" }, topics: [topic] };
    const a = new Consumer(opts);
    await waitFor(() => { a.poll(); return a.assignment.length === 4 ? true : undefined; });
    expect(a.takeRebalanceEvents().map((e) => e.kind)).toEqual(["assign"]);
    const b = new Consumer(opts);
    // a must see the revocation and hold it until the caller completes it.
    await waitFor(() => { a.poll(); b.poll(); return a.pendingRevoke ? true : undefined; });
    expect(a.pendingRevoke!.length).toBe(4);
    a.completeRevoke();
    await waitFor(() => { a.poll(); b.poll(); if (b.pendingRevoke) b.completeRevoke(); return a.assignment.length + b.assignment.length === 4 && a.assignment.length > 0 && b.assignment.length > 0 ? true : undefined; }, 30_000);
    const kinds = a.takeRebalanceEvents().map((e) => e.kind);
    expect(kinds.slice(0, 2)).toEqual(["revoke", "assign"]);
    const all = [...a.assignment, ...b.assignment].map((p) => p.partition).sort();
    expect(all).toEqual([0, 1, 2, 3]);
    a.close();
    b.close();
  });

  test("an empty poll's wait ends when a message arrives (librdkafka's wake-up), not at its deadline; close frees the pipe", async () => {
    const topic = await createTopic("wake", 1);
    cleanup.push(topic);
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("wake") }, topics: [topic] });
    const p = new Producer(props);
    try {
      await waitFor(() => { c.poll(); return c.assignment.length === 1 ? true : undefined; });
      // Nothing to read: a short wait ends at its deadline.
      expect(c.poll()).toEqual([]);
      await c.waitForMessages(50);
      // An arrival ends a wait whose deadline is far away.
      const deadlineMs = 60_000;
      const t0 = performance.now();
      const woken = c.waitForMessages(deadlineMs);
      await p.produce(topic, "wake up");
      await woken;
      expect(performance.now() - t0).toBeLessThan(deadlineMs / 2);
      const got = await waitFor(() => { const m = c.poll(); return m.length ? m : undefined; });
      expect(got.map(text)).toEqual(["wake up"]);
    } finally {
      p.close();
      c.close();
    }
    // Closed consumers leave no descriptor behind (the read end of the pipe closes once its stream
    // lets go of it, a turn of the event loop later). Counted after the first consumer: Bun opens
    // a pipe of its own on the first stream over a descriptor.
    const openFds = () => readdirSync("/proc/self/fd").length;
    const fdsBefore = openFds();
    for (let i = 0; i < 3; i++) {
      const more = new Consumer({ props: { ...props, "group.id": uniqueName("wake") }, topics: [topic] });
      await more.waitForMessages(10);
      more.close();
    }
    await waitFor(() => (openFds() <= fdsBefore ? true : undefined), 4_000, "wake-up pipes closed");
  }, 30_000);

  test("200k messages consumed without a leak: RSS after the run within a few MiB of RSS after a warm-up", async () => {
    const topic = await createTopic("leak", 1);
    cleanup.push(topic);
    const p = new Producer(props);
    const payload = "x".repeat(200);
    for (let i = 0; i < 4; i++) await p.produceBatch(topic, Array.from({ length: 100_000 }, () => payload));
    p.close();
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("g"), "queued.max.messages.kbytes": "8192" }, topics: [topic] });
    let got = 0;
    const drain = async (total: number) => {
      while (got < total) {
        const b = c.poll();
        got += b.length;
        if (!b.length) await Bun.sleep(2);
      }
    };
    await drain(200_000);
    Bun.gc(true);
    const warm = process.memoryUsage.rss();
    await drain(400_000);
    Bun.gc(true);
    const after = process.memoryUsage.rss();
    c.close();
    expect((after - warm) / 2 ** 20).toBeLessThan(8);
  }, 60_000);
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
      const [repaired] = await ensureTopics(admin, specs);
      expect(repaired).toMatchObject({ topic: raw, action: "repaired", repaired: { "retention.ms": "1000" } });
      const after = await admin.describeConfigs(raw);
      expect(after["retention.ms"]!.value).toBe("86400000");
      expect(after["max.message.bytes"]!.value).toBe("2000000");
    });
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
});
