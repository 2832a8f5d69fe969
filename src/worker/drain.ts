/**
 * A shutdown's drain: what is held is flushed and committed before the worker leaves the group.
 * The loop goes on polling (every partition paused) while it does, so that a loss of the
 * assignment during a long drain (a freeze, a cut from the brokers) is heard: what is held is then
 * dropped, not flushed after the partitions' next owner checked them. A zombie's shutdown flushes
 * nothing.
 */
import type { Delivery } from "../delivery/delivery.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import { settledWatching } from "./revoke.ts";

/** The poll's pace while a shutdown drains (a settle wakes it sooner). */
const DRAIN_POLL_MS = 100;

/** `poll` polls the consumer as the loop does (a throw is the worker's fatal path, not the drain's). */
export async function drain(consumer: GroupConsumer, delivery: Delivery, poll: () => void): Promise<void> {
  const lost = () => consumer.revokeLost;
  if (lost()) return delivery.abandon();
  delivery.pauseForRevoke();
  let settled = false;
  const settling = delivery.settle().finally(() => (settled = true));
  while (!settled) {
    await Promise.race([settling, consumer.waitForMessages(DRAIN_POLL_MS)]);
    delivery.watchClocks();
    if (settled) break;
    poll();
    if (lost()) {
      delivery.abandon();
      break;
    }
  }
  await settledWatching(settling, () => settled, consumer, delivery);
}
