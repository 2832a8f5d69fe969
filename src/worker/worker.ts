/**
 * The stage order, and nothing else: poll → decode (parse, validate, normalize) → hand over a row
 * or a rejection (or an offset passed over) → flush when due → settle on revoke or drain on stop.
 * Everything after the hand-over (batches, the DLQ, offsets and commits, pauses) is delivery's
 * (src/delivery/). A DLQ, commit or poll failure is fatal: the worker stops without flushing or
 * committing further.
 */
import type { Delivery } from "../delivery/delivery.ts";
import type { GroupConsumer } from "../kafka/consumer.ts";
import type { Message } from "../kafka/message.ts";
import { log } from "../log.ts";
import { decodeOne, type DecodeContext } from "./decode-guard.ts";
import { drain } from "./drain.ts";
import { releaseRevoked } from "./revoke.ts";

export type WorkerState = "starting" | "running" | "tripped" | "draining" | "stopped" | "failed";

// Longest waits for records (arrivals wake it sooner) and for room (a settle wakes it sooner).
const IDLE_WAIT_MS = 20, FULL_WAIT_MS = 50;

export class Worker {
  readonly #consumer: GroupConsumer;
  readonly #ctx: DecodeContext;
  readonly #delivery: Delivery;
  #state: WorkerState = "starting";
  #assigned = false;
  #stopRequested = false;
  #fatal: Error | null = null;

  constructor(deps: { consumer: GroupConsumer; decoding: DecodeContext; delivery: Delivery }) {
    this.#consumer = deps.consumer;
    this.#ctx = deps.decoding;
    this.#delivery = deps.delivery;
    // The consumer's wait for records is the loop's one waiting point: whatever else it waits for wakes it.
    this.#delivery.listen({ onFatal: (e) => this.#fail(e), onSettled: () => this.#consumer.wake() });
  }

  /** "tripped" while running with the DLQ breaker tripped (consumption paused, the loop goes on). */
  get state(): WorkerState {
    return this.#state === "running" && this.#delivery.tripped ? "tripped" : this.#state;
  }

  /** Joined the group and got an assignment (possibly empty). */
  get assigned(): boolean { return this.#assigned; } // prettier-ignore

  /** Asks for a graceful stop: stop polling, flush, commit, leave the group. */
  stop(): void {
    this.#stopRequested = true;
    this.#consumer.wake();
  }

  /** Runs until stopped (resolves) or a fatal error (rejects). */
  async run(): Promise<void> {
    this.#state = "running";
    while (!this.#stopRequested && !this.#fatal) {
      for (const partitions of this.#consumer.takeAssigned()) {
        this.#assigned = true;
        this.#delivery.assigned(partitions);
      }
      if (this.#consumer.pendingRevoke) {
        await this.#releaseRevoked();
        continue;
      }
      this.#delivery.flushIfDue();
      if (this.#delivery.full && !this.#delivery.awaitingMembership) {
        await this.#consumer.waitForMessages(FULL_WAIT_MS); // backpressure, unless a send awaits polls' proof
        continue;
      }
      const messages = this.#poll();
      if (messages.length === 0) {
        this.#delivery.idle();
        await this.#consumer.waitForMessages(IDLE_WAIT_MS);
        continue;
      }
      this.#handOver(messages);
      this.#delivery.flushIfDue();
      await this.#delivery.clock.yield(); // timers, HTTP and delivery reports between polls
    }
    if (!this.#fatal) {
      this.#state = "draining";
      await drain(this.#consumer, this.#delivery, () => void this.#poll(true));
    }
    if (this.#fatal) {
      this.#state = "failed";
      throw this.#fatal;
    }
    await this.#consumer.close();
    this.#state = "stopped";
  }

  /** A poll that throws (the client may not use the group) is fatal, through the one fatal path. */
  #poll(draining = false): Message[] {
    try {
      return this.#consumer.poll(this.#delivery.pollMax(), draining);
    } catch (e) {
      this.#fail(e);
      return [];
    }
  }

  #handOver(messages: Message[]): void {
    const ingestedAt = Math.floor(this.#delivery.clock.now() / 1000);
    this.#delivery.received(messages);
    for (const m of messages)
      if (m.passedOver) this.#delivery.passedOver(m);
      else this.#delivery.handOver(m, decodeOne(m, this.#ctx), ingestedAt);
  }

  /** Commits everything of the revoked partitions before librdkafka gives them away (or drops it, lost). */
  async #releaseRevoked(): Promise<void> {
    const failed = () => this.#fatal !== null;
    const kept = await releaseRevoked(this.#consumer, this.#delivery, failed).catch((e) => (this.#fail(e), []));
    if (kept.length > 0) this.#handOver(kept);
  }

  #fail(e: unknown): void {
    if (this.#fatal) return;
    this.#fatal = e instanceof Error ? e : new Error(String(e));
    this.#delivery.stop();
    log.error("fatal: stopping without flushing or committing further", { err: this.#fatal });
    this.#consumer.wake();
  }
}

