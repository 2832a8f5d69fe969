/**
 * Commits past what librdkafka passed over. A transactional producer's commit marker takes an
 * offset of its own after its last record, and an aborted transaction's records take theirs: no
 * record stands for them, so the commit stopped short of them and a quiet partition showed a lag
 * of 1 for ever. While the loop is idle, at most once a second, librdkafka's positions are read (a
 * local call), and a partition whose every record handed over is durable moves to its position
 * (tracker.ts passOver).
 */
import type { GroupConsumer } from "../../kafka/consumer.ts";
import { log } from "../../log.ts";
import type { Clock } from "../../time/clock.ts";

/** Least time between two reads of librdkafka's positions. */
const INTERVAL_MS = 1_000;

export class PassOver {
  #at = -Infinity;

  constructor(
    private readonly consumer: GroupConsumer,
    private readonly clock: Clock,
    private readonly moveTo: (positions: Array<{ partition: number; offset: number }>) => void,
  ) {}

  /** Call while the loop is idle. */
  tick(): void {
    const positions = this.consumer.positions;
    const now = this.clock.mono();
    if (!positions || now - this.#at < INTERVAL_MS) return;
    this.#at = now;
    try {
      const at = positions.call(this.consumer, this.consumer.assignment);
      this.moveTo(at.map((p) => ({ partition: p.partition, offset: Number(p.offset ?? -1) })));
    } catch (e) {
      log.debug("librdkafka's positions not read", { err: e as Error });
    }
  }
}
