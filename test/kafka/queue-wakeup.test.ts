// The consumer queue's wait (queue-wakeup.ts) without a broker: wake() ends it long before its
// deadline. (An arrival ending it, the deadline, and a wake with nobody waiting are in
// consumer.test.ts, against the broker: without one, librdkafka's connection errors land on the
// same queue and end waits early.)
import { expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";

setDefaultTimeout(60_000);

test("wake() ends a wait long before its deadline", async () => {
  const c = new Consumer({ props: { "bootstrap.servers": "127.0.0.1:1", "group.id": "queue-wakeup-test" }, topics: [] });
  try {
    const t = performance.now();
    const waiting = c.waitForMessages(60_000);
    c.wake();
    await waiting;
    expect(performance.now() - t).toBeLessThan(1000);
  } finally {
    await c.close();
  }
});
