/**
 * Every offset of an owned partition accounted for. Within an assignment a partition's records are
 * handed over in offset order from the committed offset on; where the next one handed over (or
 * librdkafka's position, pass-over.ts) lies past the offset expected, the offsets between were never
 * handed over. The tracker reports each such range (tracker.ts onGap); here it is told apart:
 *  - the offsets below the partition's log start were deleted by the broker before they were
 *    fetched (retention outlived by an outage, or DeleteRecords): **expired**, lost to this worker.
 *    One error line names the partition, the range and the count; `records_expired` counts them and
 *    CdrWorkerRecordsExpired pages (docs/runbook.md "Records expired before they were fetched");
 *  - the others librdkafka passed over: under read_committed a transactional producer's commit
 *    markers and an aborted transaction's records. Counted as `offsets_passed_over`, a debug line
 *    each.
 * The log start is read once for every gap waiting (at most once a second, a ListOffsets request):
 * a transactional producer leaves a gap of one offset after each transaction, and a read each would
 * cost the broker a request a transaction. Log starts only grow, so a start read after the gap is at
 * least the one that deleted it; the range counts as expired only up to the first offset handed
 * over after it, which was not deleted.
 */
import type { Clock } from "../clock.ts";
import { systemClock } from "../clock.ts";
import { log } from "../../log.ts";
import type { Counters } from "../../stats/counters.ts";

/** Least time between two reads of the log starts. */
const READ_EVERY_MS = 1_000;
/** The wait after a read that failed, doubling up to the longest. */
const RETRY_MS = [1_000, 30_000] as const;

export interface Gap {
  partition: number;
  /** First offset not handed over. */
  from: number;
  /** First offset handed over (or librdkafka's position) after the gap, exclusive. */
  to: number;
}

export interface GapDeps {
  /** Each partition's log start now (ListOffsets, earliest). */
  logStarts(partitions: readonly number[]): Promise<Map<number, number>>;
  counters: Counters;
  clock?: Clock;
}

export class Gaps {
  readonly #deps: GapDeps;
  readonly #clock: Clock;
  #waiting: Gap[] = [];
  #timer = false;
  #lastRead = -Infinity;
  #failures = 0;
  #stopped = false;

  constructor(deps: GapDeps) {
    this.#deps = deps;
    this.#clock = deps.clock ?? systemClock;
  }

  /** Gaps not yet told apart. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** A range of offsets never handed over: told apart at the next read of the log starts. */
  found(gap: Gap): void {
    if (gap.to <= gap.from || this.#stopped) return;
    this.#waiting.push(gap);
    this.#schedule();
  }

  /** Revoked partitions: their gaps go with them (the next owner reads the same offsets). */
  forget(partitions: readonly number[]): void {
    if (this.#waiting.length === 0) return;
    const gone = new Set(partitions);
    this.#waiting = this.#waiting.filter((g) => !gone.has(g.partition));
  }

  stop(): void {
    this.#stopped = true;
  }

  #schedule(): void {
    if (this.#timer) return;
    this.#timer = true;
    const wait = this.#failures
      ? Math.min(RETRY_MS[1], RETRY_MS[0] * 2 ** (this.#failures - 1))
      : Math.max(0, this.#lastRead + READ_EVERY_MS - this.#clock.mono());
    this.#clock.setTimeout(() => void this.#read(), wait, { unref: true });
  }

  async #read(): Promise<void> {
    const gaps = this.#waiting;
    this.#waiting = [];
    this.#lastRead = this.#clock.mono();
    let starts: Map<number, number>;
    try {
      starts = await this.#deps.logStarts([...new Set(gaps.map((g) => g.partition))]);
      this.#failures = 0;
    } catch (e) {
      this.#failures++;
      log.warn("the raw topic's log starts were not read: gaps in its offsets are told apart later", {
        gaps: gaps.length,
        attempt: this.#failures,
        err: e as Error,
      });
      this.#waiting = gaps.concat(this.#waiting);
      return this.#again();
    }
    for (const g of gaps) {
      const start = starts.get(g.partition);
      if (start === undefined) this.#waiting.push(g);
      else this.#tell(g, start);
    }
    this.#again();
  }

  #again(): void {
    this.#timer = false;
    if (this.#waiting.length > 0 && !this.#stopped) this.#schedule();
  }

  #tell(g: Gap, logStart: number): void {
    const pc = this.#deps.counters.partition(g.partition);
    const expiredTo = Math.min(g.to, Math.max(g.from, logStart));
    const expired = expiredTo - g.from;
    const passed = g.to - expiredTo;
    if (expired > 0) {
      pc.expired += expired;
      this.#deps.counters.recordsExpired += expired;
      log.error("records were deleted by the broker before this worker fetched them: lost to it", {
        partition: g.partition,
        from: g.from,
        to: expiredTo,
        records: expired,
        log_start: logStart,
      });
    }
    if (passed > 0) {
      pc.passedOver += passed;
      this.#deps.counters.offsetsPassedOver += passed;
      log.debug("offsets librdkafka passed over (transaction markers, aborted records)", {
        partition: g.partition,
        from: expiredTo,
        to: g.to,
      });
    }
  }
}
