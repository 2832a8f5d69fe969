/**
 * Does librdkafka's prefetch keep a consumer of a given speed fed? A consumer that spends a fixed
 * time per message drains a backlog; the figure is the time it waits on an empty local queue
 * although the topic still has messages.
 *
 * Why it matters: librdkafka stops fetching a partition once its local queue exceeds
 * queued.max.messages.kbytes and waits fetch.queue.backoff.ms (1000 by default) before it looks
 * again. A queue holding less than that much of the consumer's work runs dry on every cycle.
 * Usage: bun scripts/bench/prefetch.ts [messages=300000] [us_per_message=20] [queue_kbytes=16384] [fetch_queue_backoff_ms=librdkafka's default]
 */
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";

const N = Number(process.argv[2] ?? 300_000);
const US = Number(process.argv[3] ?? 20);
const KBYTES = process.argv[4] ?? "16384";
const BACKOFF = process.argv[5];
const props = { "bootstrap.servers": process.env.KAFKA_BROKERS ?? "127.0.0.1:9092" };
const topic = `bench.prefetch.${Date.now().toString(36)}`;

const admin = new Admin(props);
await admin.createTopics([{ name: topic, partitions: 1, replicationFactor: 1, configs: {} }]);
const producer = new Producer({ ...props, "linger.ms": "5", "batch.num.messages": "10000" });
const chunk = Array.from({ length: 10_000 }, () => "x".repeat(270));
for (let sent = 0; sent < N; sent += chunk.length) await producer.produceBatch(topic, chunk.slice(0, Math.min(chunk.length, N - sent)));
producer.close();

const c = new Consumer({ props: { ...props, "group.id": `${topic}.g`, "queued.max.messages.kbytes": KBYTES, ...(BACKOFF ? { "fetch.queue.backoff.ms": BACKOFF } : {}) }, topics: [topic], maxBatch: 300 });
let got = 0;
let waitingMs = 0;
let t1 = 0;
while (got < N) {
  const batch = c.poll();
  if (got === 0 && batch.length > 0) t1 = performance.now();
  got += batch.length;
  if (batch.length > 0) {
    // The stand-in for the worker's per-message work, then a turn of the event loop as it takes.
    const until = performance.now() + (batch.length * US) / 1000;
    while (performance.now() < until);
    await new Promise((resolve) => setImmediate(resolve));
  } else {
    const w = performance.now();
    await c.waitForMessages(20);
    if (got > 0) waitingMs += performance.now() - w;
  }
}
const totalMs = performance.now() - t1;
await c.close();
await admin.deleteTopics([topic]);
admin.close();
console.log(JSON.stringify({
  messages: N, us_per_message: US, queue_kbytes: Number(KBYTES), fetch_queue_backoff_ms: BACKOFF ? Number(BACKOFF) : "default", total_ms: Math.round(totalMs),
  work_ms: Math.round((N * US) / 1000), waiting_on_empty_queue_ms: Math.round(waitingMs), waiting_share: +(waitingMs / totalMs).toFixed(2),
}));
process.exit(0);
