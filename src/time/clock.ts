/**
 * The one seam for time. Delivery, the worker's loop, the lease, retries, replay checks and the
 * ClickHouse writer read the clocks and start timers only through a Clock, so that the delivery
 * simulation (test/sim/) can run the same code on a virtual clock, with a worker frozen, stepped or
 * killed at chosen instants. Everything else uses `systemClock`, the process's own clocks.
 */
export interface Clock {
  /** Wall-clock milliseconds since the epoch (Date.now). */
  now(): number;
  /** Monotonic milliseconds (performance.now): gaps and durations. */
  mono(): number;
  /** Runs `fn` after `ms`; returns what cancels it. `unref`: the timer does not keep the process alive. */
  setTimeout(fn: () => void, ms: number, opts?: { unref?: boolean }): () => void;
  sleep(ms: number): Promise<void>;
  /** Lets timers, I/O and delivery reports run before going on (setImmediate). */
  yield(): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  mono: () => performance.now(),
  setTimeout(fn, ms, opts) {
    const t = setTimeout(fn, ms);
    if (opts?.unref) t.unref();
    return () => clearTimeout(t);
  },
  sleep: (ms) => Bun.sleep(ms),
  yield: () => new Promise<void>((r) => setImmediate(r)),
};
