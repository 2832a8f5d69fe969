/**
 * Settling a revocation: what is held of the revoked partitions is flushed and committed before
 * librdkafka gives them away. The loop goes on polling meanwhile, every partition paused, so the
 * member stays in the group (max.poll.interval.ms) and hears if the group takes the assignment
 * away instead (a lost revocation: its session ran out, or the rebalance timed out while
 * ClickHouse did not answer), or the coordinator refuses its heartbeat as no member (removed or
 * fenced). Then what is held is dropped, not flushed: the next owner's replay check may already
 * have run, and its records are that owner's to replay.
 */
import type { Delivery } from "../delivery/delivery.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import { log } from "../log.ts";

/** The poll's pace while a revocation settles (a settle wakes it sooner). */
const REVOKE_POLL_MS = 100;
/**
 * Share of max.poll.interval.ms (the group's rebalance timeout) a revocation may take to settle.
 * Giving the whole assignment up unsettled is always safe (nothing past what is durable was
 * committed) and, done before the timeout, lets the rebalance finish with the member still in it.
 */
const SETTLE_SHARE = 0.8;

/**
 * Settles and releases the pending revocation, unless a fatal error came meanwhile. Returns the
 * records a poll handed out meanwhile of partitions still owned (none while paused, as librdkafka
 * drops what it fetched before a pause; kept rather than trusted), for the caller to hand over.
 */
export async function releaseRevoked(
  consumer: GroupConsumer,
  delivery: Delivery,
  failed: () => boolean,
): Promise<Message[]> {
  const held = await settleRevoke(consumer, delivery);
  if (failed()) return [];
  delivery.release(consumer.pendingRevoke!);
  consumer.completeRevoke();
  delivery.resumeAfterRevoke();
  const owned = new Set(consumer.assignment.map((p) => p.partition));
  return held.filter((m) => owned.has(m.partition));
}

async function settleRevoke(consumer: GroupConsumer, delivery: Delivery): Promise<Message[]> {
  const held: Message[] = [];
  if (consumer.revokeLost || delivery.removedFromGroup) {
    delivery.abandon();
    return held;
  }
  delivery.pauseForRevoke();
  const started = delivery.clock.mono();
  let settled = false, overdue = false;
  const settling = delivery.settle().finally(() => (settled = true));
  while (!settled) {
    await Promise.race([settling, consumer.waitForMessages(REVOKE_POLL_MS)]);
    delivery.watchClocks();
    if (settled) break;
    held.push(...consumer.poll(delivery.pollMax(), true));
    // Removed or fenced while settling: librdkafka may wait for this revocation to end before it
    // says so (KIP-848), and sends wait for a lease no heartbeat renews now. Dropped, as for a loss.
    if (consumer.revokeLost || delivery.removedFromGroup) {
      delivery.abandon();
      break;
    }
    // Soon the group evicts the member. When the revocation is the whole assignment, dropping is as
    // safe as for a loss; a part of it (an incremental revocation) cannot be dropped alone, since
    // the rest goes on, and waits for librdkafka's verdict.
    if (!overdue && delivery.clock.mono() - started > SETTLE_SHARE * delivery.maxPollIntervalMs) {
      overdue = true;
      const whole = consumer.pendingRevoke!.length >= consumer.assignment.length;
      log.warn("a revocation did not settle within max.poll.interval.ms", { dropping: whole });
      if (whole) {
        delivery.abandon();
        break;
      }
    }
  }
  await settledWatching(settling, () => settled, consumer, delivery);
  return held;
}

/**
 * What an abandon cut short may still be ending (a commit waiting on its coordinator): the clocks
 * are watched meanwhile.
 */
export async function settledWatching(
  settling: Promise<void>,
  settled: () => boolean,
  consumer: GroupConsumer,
  delivery: Delivery,
): Promise<void> {
  while (!settled()) {
    await Promise.race([settling, consumer.waitForMessages(REVOKE_POLL_MS)]);
    delivery.watchClocks();
  }
  await settling;
}
