// Every call on a closed Kafka client throws or answers safely and never reaches native code: a
// use after free is a segfault, never an acceptable outcome. Each case runs in a subprocess, so a
// crash shows as a signal instead of taking the test runner down; the test expects exit 0.
import { expect, setDefaultTimeout, test } from "bun:test";
import { KAFKA_BROKERS, ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

async function runScript(body: string): Promise<{ code: number | null; signal: unknown; out: Record<string, unknown>; err: string }> {
  const script = `
    import { Admin } from "${ROOT}/src/kafka/admin.ts";
    import { Consumer } from "${ROOT}/src/kafka/consumer.ts";
    import { Producer } from "${ROOT}/src/kafka/producer.ts";
    const out = {};
    const outcome = async (f) => { try { return { ok: await f() }; } catch (e) { return { error: e.message }; } };
    ${body}
    console.log(JSON.stringify(out));`;
  const proc = Bun.spawn(["bun", "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [stdout, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  if (proc.exitCode !== 0) console.error(err);
  return { code: proc.exitCode, signal: proc.signalCode, out: stdout.trim() ? JSON.parse(stdout) : {}, err };
}

test("Admin: a second close() does nothing, every call after close() throws, and an empty topic name never reaches librdkafka", async () => {
  const r = await runScript(`
    const a = new Admin({ "bootstrap.servers": "${KAFKA_BROKERS}" });
    out.empty = await outcome(() => a.describeConfigs(""));
    a.close();
    a.close();
    out.describe = await outcome(() => a.describeConfigs("cdr.raw"));
    out.create = await outcome(() => a.createTopics([{ name: "x", partitions: 1, replicationFactor: 1, configs: {} }]));
    out.counts = await outcome(() => a.partitionCounts(["cdr.raw"]));`);
  expect([r.code, r.signal]).toEqual([0, null]);
  expect(r.out).toEqual({
    empty: { error: "describe configs: a topic name is required" },
    describe: { error: "describe cdr.raw: the Kafka client is closed" },
    create: { error: "admin request: the Kafka client is closed" },
    counts: { error: "metadata: the Kafka client is closed" },
  });
});

test("Admin: close() during a request frees the handle only after the request ends", async () => {
  const r = await runScript(`
    const a = new Admin({ "bootstrap.servers": "${KAFKA_BROKERS}" });
    const pending = outcome(() => a.describeConfigs("no-such-topic-for-this-test"));
    a.close();
    out.pending = Object.keys(await pending);`);
  expect([r.code, r.signal]).toEqual([0, null]);
  expect(r.out.pending).toEqual(["error"]);
});

test("Consumer: watermarks answer null, commits and queries throw after close()", async () => {
  const r = await runScript(`
    const c = new Consumer({ props: { "bootstrap.servers": "${KAFKA_BROKERS}", "group.id": "closed-${Date.now()}" }, topics: [] });
    out.closedInTime = await c.close();
    await c.close();
    out.watermarks = c.watermarks("cdr.raw", 0);
    out.commit = await outcome(() => c.commit([{ topic: "cdr.raw", partition: 0, offset: 1n }]));
    out.query = await outcome(() => c.queryWatermarks("cdr.raw", 0));
    out.committed = await outcome(() => c.committed([{ topic: "cdr.raw", partition: 0 }]));
    out.poll = c.poll().length;`);
  expect([r.code, r.signal]).toEqual([0, null]);
  expect(r.out).toEqual({
    closedInTime: true,
    watermarks: null,
    commit: { error: "commit: the Kafka client is closed" },
    query: { error: "watermarks: the Kafka client is closed" },
    committed: { error: "committed: the Kafka client is closed" },
    poll: 0,
  });
});

test("Producer: a send waiting out QUEUE_FULL when the producer closes is rejected, never sent on the freed handle", async () => {
  // A queue of one message and a broker that never answers: the second send waits for room.
  const r = await runScript(`
    const p = new Producer({ "bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.messages": "1", "enable.idempotence": "false" });
    const first = outcome(() => p.produce("t", "a"));
    const second = outcome(() => p.produce("t", "b"));
    await Bun.sleep(200);
    p.close();
    out.first = await first;
    out.second = await second;
    out.later = await outcome(() => p.produce("t", "c"));
    out.batch = await outcome(() => p.produceBatch("t", ["d"]));
    out.flush = await outcome(() => p.flush(100));
    out.outstanding = p.outstanding;
    await Bun.sleep(100);`);
  expect([r.code, r.signal]).toEqual([0, null]);
  expect(r.out).toEqual({
    first: { error: "producer closed before delivery" },
    second: { error: "producer closed before delivery" },
    later: { error: "produce to t: the Kafka client is closed" },
    batch: { error: "produce to t: the Kafka client is closed" },
    flush: { error: "flush: the Kafka client is closed" },
    outstanding: 0,
  });
});

test("a librdkafka error says whether a retry can help: transport and coordinator trouble can, a missing topic cannot", async () => {
  const { kafkaError } = await import("../../src/kafka/handle.ts");
  expect(kafkaError("KAFKA_CLIENT", "committed", -185).retryable).toBe(true); // _TIMED_OUT
  expect(kafkaError("KAFKA_CLIENT", "committed", 16).retryable).toBe(true); // NOT_COORDINATOR
  expect(kafkaError("KAFKA_CLIENT", "watermarks", 3).retryable).toBe(false); // UNKNOWN_TOPIC_OR_PART
  expect(kafkaError("KAFKA_ADMIN", "metadata", 3, true).retryable).toBe(true); // the caller knows better
});
