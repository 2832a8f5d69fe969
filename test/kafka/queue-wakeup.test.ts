// The consumer queue's wait (queue-wakeup.ts) without a broker: it ends at its deadline, or at
// wake() long before it; a wake with nobody waiting ends nothing later. (An arrival ending it is
// in consumer.test.ts, against the broker.)
import { expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";

setDefaultTimeout(60_000);

test("a wait ends at its deadline or at wake(), and a wake with nobody waiting is not kept for the next wait", async () => {
  const c = new Consumer({ props: { "bootstrap.servers": "127.0.0.1:1", "group.id": "queue-wakeup-test" }, topics: [] });
  try {
    let t = performance.now();
    await c.waitForMessages(50);
    expect(performance.now() - t).toBeGreaterThanOrEqual(45);
    t = performance.now();
    const waiting = c.waitForMessages(60_000);
    c.wake();
    await waiting;
    expect(performance.now() - t).toBeLessThan(1000);
    c.wake();
    t = performance.now();
    await c.waitForMessages(50);
    expect(performance.now() - t).toBeGreaterThanOrEqual(45);
  } finally {
    await c.close();
  }
});
