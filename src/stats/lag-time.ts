/**
 * Lag in time: how long the oldest record of each owned partition has waited for its commit. The
 * committed offset names that record; its timestamp is read apart (kafka/record-times.ts) every
 * interval, for every owned partition: the worker's own consumer cannot say, as a partition it has
 * paused fetches nothing and its cached high watermark stops. Between reads the age grows with the
 * clock; records that arrived at a paused partition after a read that found it caught up count from
 * the next read. So the figure is right to within one interval. Compared with the raw topic's
 * retention.ms, it says how soon records would be deleted before they are stored
 * (CdrWorkerLagNearRetention).
 */
import { log } from "../log.ts";
import { partitionLag } from "./lag.ts";

export interface LagTimeSource {
  /** Owned partitions with their committed offset (-1: none yet) and cached high watermark. */
  owned: () => Array<{ partition: number; committed: number; high: number | null }>;
  /** Record timestamps at offsets, null where nothing is there yet (RecordTimes.at for the raw topic). */
  timesAt: (offsets: ReadonlyMap<number, number>) => Promise<Map<number, number | null>>;
}

export class LagTime {
  /** Per partition: the committed offset read at, and its record's timestamp (null: none, caught up). */
  readonly #read = new Map<number, { offset: number; timestamp: number | null }>();
  readonly #timer: ReturnType<typeof setInterval> | null;
  #reading: Promise<void> | null = null;
  #stopped = false;

  constructor(
    private readonly source: LagTimeSource,
    intervalMs: number,
  ) {
    this.#timer = intervalMs > 0 ? setInterval(() => void this.refresh(), intervalMs) : null;
  }

  /** Reads the timestamps at the committed offsets of the partitions that lag; one read at a time. */
  refresh(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#reading ??= this.#refresh().finally(() => (this.#reading = null));
    return this.#reading;
  }

  async #refresh(): Promise<void> {
    const wanted = new Map<number, number>();
    const owned = this.source.owned();
    for (const [p] of this.#read) if (!owned.some((o) => o.partition === p)) this.#read.delete(p);
    for (const o of owned) if (o.committed >= 0) wanted.set(o.partition, o.committed);
    if (wanted.size === 0) return;
    try {
      const times = await this.source.timesAt(wanted);
      for (const [p, offset] of wanted) {
        const timestamp = times.get(p);
        if (timestamp !== undefined) this.#read.set(p, { offset, timestamp });
      }
    } catch (e) {
      log.warn("could not read the time of the oldest waiting records", { err: e as Error });
    }
  }

  /**
   * Seconds the oldest uncommitted record of a partition has waited: 0 with nothing waiting, null
   * while unknown (nothing committed yet, or not read yet).
   */
  seconds(partition: number, committed: number, high: number | null, now = Date.now()): number | null {
    if (committed < 0) return null;
    const cachedLag = partitionLag(high, committed);
    const read = this.#read.get(partition);
    if (!read) return cachedLag === 0 ? 0 : null;
    // A read at an offset the group has gone back from (a new owner's commit) names a younger record.
    if (read.offset > committed) return null;
    if (read.timestamp === null) return 0;
    // The record read is committed since, and the consumer saw nothing waiting after it.
    if (committed > read.offset && cachedLag === 0) return 0;
    return Math.max(0, (now - read.timestamp) / 1000);
  }

  /** No read starts after this; resolves once a read in progress has ended (its reader may then close). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#reading;
  }
}
