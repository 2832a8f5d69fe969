// The producer binding against the real broker.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { consumeN, createTopic, deleteTopics, header, props, text } from "../support/kafka.ts";
import { KAFKA_BROKERS, ROOT, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

describe("producer", () => {
  test("message ids past 2^32 still settle (the report's opaque is read as 64 bits, as it is written)", async () => {
    const topic = await createTopic("ids", 1);
    cleanup.push(topic);
    const p = new Producer(props, { firstMessageId: 2 ** 32 - 2 });
    try {
      const settled = Promise.all(Array.from({ length: 4 }, (_, i) => p.produce(topic, `m${i}`)));
      const timeout = Bun.sleep(10_000).then(() => "unsettled");
      expect(await Promise.race([settled, timeout])).toEqual([0, 1, 2, 3].map((offset) => ({ partition: 0, offset })));
      await p.produceBatch(topic, ["b0", "b1"]);
      expect(await consumeN(topic, 6)).toHaveLength(6);
    } finally {
      p.close();
    }
  });
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
  test("the client's own errors are logged while it is idle, not left on its queue: a plaintext client at a TLS listener", async () => {
    // The broker's TLS listener is three ports above its plaintext one (scripts/services.sh).
    const [host, port] = KAFKA_BROKERS.split(":");
    const script = `
      import { Producer } from "${ROOT}/src/kafka/producer.ts";
      const p = new Producer({ "bootstrap.servers": "${host}:${Number(port) + 3}", "client.id": "idle-producer" });
      await Bun.sleep(4000);
      // An error may land on the queue just now; the idle pump serves it within its interval.
      const until = Date.now() + 2000;
      while (p.outstanding > 0 && Date.now() < until) await Bun.sleep(20);
      console.log(JSON.stringify({ outstanding: p.outstanding }));
      p.close();`;
    const proc = Bun.spawn(["bun", "-e", script], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(0);
    const lines = err.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, string>);
    const errors = lines.filter((l) => l.msg === "kafka client error" && l.client === "idle-producer");
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.map((e) => e.code)).toContainEqual(expect.stringMatching(/^_(TRANSPORT|ALL_BROKERS_DOWN|SSL)$/));
    expect(JSON.parse(out).outstanding).toBe(0);
  }, 20_000);
});
