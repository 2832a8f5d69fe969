/**
 * Records handed out again under the same assignment: dropped by the caller, and said here once per
 * run of them. Those the worker's own seek back to a skipped range brings again (offsets/gaps.ts)
 * are its doing, not librdkafka's: said apart at info, and not counted as repeats
 * (records_repeated pages nobody, but it is read as librdkafka's).
 */
import { log } from "../log.ts";
import type { Counters } from "../stats/counters.ts";

/** The warning's words for records librdkafka hands out again (records_repeated counts them). */
const REFETCHED = "librdkafka handed out records already consumed";

interface Run {
  partition: number;
  from: number;
  to: number;
  ownSeek: boolean;
}

export class Repeats {
  readonly #counters: Counters;
  /** Runs of records handed out again since they were last said. */
  #runs: Run[] = [];

  constructor(counters: Counters) {
    this.#counters = counters;
  }

  /** Whether runs wait to be said. */
  get unsaid(): boolean {
    return this.#runs.length > 0;
  }

  /** A record handed out again: counted (unless the worker's own seek brought it) and added to its run. */
  note(partition: number, offset: number, ownSeek: boolean): void {
    if (!ownSeek) {
      this.#counters.recordsRepeated++;
      this.#counters.partition(partition).repeated++;
    }
    const last = this.#runs.at(-1);
    if (last && last.partition === partition && offset === last.to && last.ownSeek === ownSeek)
      return void (last.to = offset + 1);
    this.#runs.push({ partition, from: offset, to: offset + 1, ownSeek });
  }

  /**
   * One line a run: the range and the count. Every one lies below the highest offset consumed under
   * this assignment, so its first copy is stored or on its way.
   */
  say(): void {
    for (const { ownSeek, ...r } of this.#runs) {
      const range = { partition: r.partition, from: r.from, to: r.to, records: r.to - r.from };
      const what = ownSeek ? "records read again after the seek back to skipped offsets" : REFETCHED;
      (ownSeek ? log.info : log.warn)(`${what}; dropped, not stored again`, range);
    }
    this.#runs = [];
  }
}
