/**
 * Every offset of an owned partition accounted for. Within an assignment a partition's records are
 * handed over in offset order from the committed offset on; where the next one handed over (or
 * librdkafka's position, pass-over.ts) lies past the offset expected, the offsets between were never
 * handed over. The tracker holds the commit at each such range (tracker.ts GapHold) and reports it
 * here, where it is told apart:
 *  - the offsets below the partition's log start were deleted by the broker before they were
 *    fetched (retention outlived by an outage, or DeleteRecords): **expired**, lost to this worker.
 *    One error line names the partition, the range and the count; `records_expired` counts them and
 *    CdrWorkerRecordsExpired pages (docs/runbook.md "Records expired before they were fetched");
 *  - the others, from a library that says each offset it passes over on purpose (a transaction's
 *    control record, an aborted record: the project's build, passed-over-reports.patch), were
 *    **skipped**: librdkafka moved past records without handing them out. Counted as
 *    `offsets_skipped`, said with the range, paged (CdrWorkerOffsetsSkipped). The partition is read
 *    again from the gap (a seek), the commit held there, up to READS times; what comes back is
 *    stored as any record, and each offset still missing after the last read gets an envelope, as an
 *    unreadable record does, so the partition moves on and every offset ends somewhere;
 *  - from a library that does not say so (an older one named by LIBRDKAFKA_PATH), the others cannot
 *    be told from transaction markers and aborted records: counted as `offsets_passed_over`.
 * The log start is read once for every gap waiting (at most once a second, a ListOffsets request):
 * a transactional producer leaves a gap of one offset after each transaction where the library does
 * not say so, and a read each would cost the broker a request a transaction. Log starts only grow,
 * so a start read after the gap is at least the one that deleted it; the range counts as expired
 * only up to the first offset handed over after it, which was not deleted.
 */
import type { Clock } from "../../time/clock.ts";
import { systemClock } from "../../time/clock.ts";
import { log } from "../../log.ts";
import type { Counters } from "../../stats/counters.ts";
import type { GapHold } from "./tracker.ts";

/** Least time between two reads of the log starts. */
const READ_EVERY_MS = 1_000;
/** The wait after a read that failed, doubling up to the longest. */
const RETRY_MS = [1_000, 30_000] as const;
/** Reads of a skipped range, the first included, before what is still missing of it is dead-lettered. */
export const READS = 3;
/** A read again that has not passed the range in this long (the partition paused?) is asked again, uncounted. */
const REREAD_AGAIN_MS = 30_000;

export interface Gap {
  partition: number;
  /** First offset not handed over. */
  from: number;
  /** First offset handed over (or librdkafka's position) after the gap, exclusive. */
  to: number;
  /** Where the tracker holds the commit at it; none where the commit passed it already. */
  hold?: GapHold;
}

export interface GapDeps {
  /** Each partition's log start now (ListOffsets, earliest). */
  logStarts(partitions: readonly number[]): Promise<Map<number, number>>;
  counters: Counters;
  clock?: Clock;
  /** The tracker's: nothing more is awaited for a gap's hold. */
  settle?(hold: GapHold): void;
  /**
   * Skips are told apart: the library says each offset it passes over on purpose, and a partition
   * can be read again (`rewind`) and what stays missing dead-lettered (`deadLetter`). Without them a
   * gap at or above the log start counts as passed over.
   */
  skips?: {
    /** Read `partition` again from `from` (a seek of the group's consumer). */
    rewind(partition: number, from: number): void;
    /** One envelope an offset, each held inside the gap (tracker.ts trackAlone). */
    deadLetter(partition: number, offsets: number[], reads: number): void;
  };
}

/** A skipped range being read again. */
interface Skip {
  hold: GapHold;
  reads: number;
  /** Set while forgotten (revoked) or stopped: its timers do nothing. */
  gone: boolean;
}

export class Gaps {
  readonly #deps: GapDeps;
  readonly #clock: Clock;
  #waiting: Gap[] = [];
  #timer = false;
  #lastRead = -Infinity;
  #failures = 0;
  #stopped = false;
  readonly #skips = new Set<Skip>();

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
    const gone = new Set(partitions);
    this.#waiting = this.#waiting.filter((g) => !gone.has(g.partition));
    for (const k of this.#skips)
      if (gone.has(k.hold.partition)) {
        k.gone = true;
        this.#skips.delete(k);
      }
  }

  /** Skipped ranges being read again. */
  get rereading(): number {
    return this.#skips.size;
  }

  stop(): void {
    this.#stopped = true;
    for (const k of this.#skips) k.gone = true;
    this.#skips.clear();
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
    const rest = g.to - expiredTo;
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
    if (rest > 0 && this.#deps.skips) {
      pc.skipped += rest;
      this.#deps.counters.offsetsSkipped += rest;
      // Without a hold the commit has passed the range already (a start learned late): said, not read again.
      const what = g.hold ? "read again" : "the commit had passed them";
      log.error(`offsets were skipped: librdkafka moved past them without a record or a word; ${what}`, {
        partition: g.partition,
        from: expiredTo,
        to: g.to,
        offsets: rest,
        log_start: logStart,
      });
      if (!g.hold) return;
      // The expired offsets never come back: only the skipped ones are awaited.
      g.hold.missing = [[expiredTo, g.to]];
      const k: Skip = { hold: g.hold, reads: 0, gone: false };
      this.#skips.add(k);
      return this.#reread(k);
    }
    if (rest > 0) {
      pc.passedOver += rest;
      this.#deps.counters.offsetsPassedOver += rest;
      log.debug("offsets librdkafka passed over (transaction markers, aborted records)", {
        partition: g.partition,
        from: expiredTo,
        to: g.to,
      });
    }
    if (g.hold) this.#deps.settle?.(g.hold);
  }

  /** The partition read again from the first offset still missing; once the read has passed the range, judged. */
  #reread(k: Skip): void {
    const { hold } = k;
    const [from] = hold.missing[0]!;
    // This read's own: a timer of an earlier read that has passed asks nothing again.
    const passed = () => this.#passed(k);
    hold.onPassed = passed;
    this.#deps.skips!.rewind(hold.partition, from);
    this.#clock.setTimeout(
      () => {
        if (!k.gone && hold.onPassed === passed) this.#reread(k);
      },
      REREAD_AGAIN_MS,
      { unref: true },
    );
  }

  /** A read again has passed the range: settled if nothing is missing, read again, or dead-lettered at the bound. */
  #passed(k: Skip): void {
    if (k.gone) return;
    k.reads++;
    const { hold } = k;
    const fields = { partition: hold.partition, from: hold.from, to: hold.last + 1, reads: k.reads };
    if (hold.missing.length === 0) {
      log.warn("the skipped offsets came back when read again: stored as any record", fields);
      return this.#settled(k);
    }
    if (k.reads < READS) return this.#reread(k);
    const offsets: number[] = [];
    for (const [from, to] of hold.missing) for (let o = from; o < to; o++) offsets.push(o);
    log.error("offsets skipped on every read: each gets an envelope, as an unreadable record does", {
      ...fields,
      offsets: offsets.length,
    });
    this.#deps.skips!.deadLetter(hold.partition, offsets, k.reads);
    this.#settled(k);
  }

  #settled(k: Skip): void {
    this.#skips.delete(k);
    this.#deps.settle?.(k.hold);
  }
}
