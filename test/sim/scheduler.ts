/**
 * Virtual time for the delivery simulation. Every timer of the code under test and every answer
 * of a simulated service is an event on one queue, ordered by (time, sequence); the run loop lets
 * the JS microtasks settle, then fires the next event, so a run is a function of its schedule.
 *
 * An event belongs to an actor (a worker process) or to the services. A frozen actor's events wait
 * until it thaws (a SIGSTOPped process: its timers and the answers that reach its sockets run when it
 * runs again), a dead actor's are dropped (kill -9). Each actor sees the wall clock with its own step.
 */
import type { Clock } from "../../src/time/clock.ts";
import { rng } from "../../src/generate/synthetic.ts";

/** The virtual wall clock's start: 2027-01-15 08:00:00 UTC. */
export const EPOCH_MS = 1_800_000_000_000;

export class Actor {
  frozen = false;
  dead = false;
  /** Added to the wall clock this actor reads (a stepped clock). */
  wallStep = 0;
  /**
   * Asked as each ClickHouse answer reaches this actor: true when it froze the actor there (a GC
   * pause or a descheduled VM just as an answer arrives); the answer then waits for the thaw.
   */
  onAnswer: (() => boolean) | null = null;
  /** Events that came due while frozen, in order. */
  readonly deferred: SimEvent[] = [];
  constructor(readonly name: string) {}
}

interface SimEvent {
  at: number;
  seq: number;
  actor: Actor | null;
  fn: () => void;
  cancelled: boolean;
}

export class Scheduler {
  /** Virtual milliseconds since the run began. */
  now = 0;
  readonly random: () => number;
  #seq = 0;
  readonly #heap: SimEvent[] = [];
  /** Events fired, for the run's report. */
  fired = 0;
  /** Hears the actor of each event just before it runs. */
  onFire: (a: Actor | null) => void = () => {};

  constructor(seed: number) {
    this.random = rng(seed);
  }

  /** A uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.random() * (hi - lo + 1));
  }

  /** Runs `fn` after `delayMs` as `actor` (null: the services). Returns what cancels it. */
  at(delayMs: number, fn: () => void, actor: Actor | null = null): () => void {
    const e: SimEvent = { at: this.now + Math.max(0, delayMs), seq: this.#seq++, actor, fn, cancelled: false };
    this.#push(e);
    return () => {
      e.cancelled = true;
    };
  }

  freeze(a: Actor): void {
    a.frozen = true;
  }

  /** The actor runs again: what came due meanwhile runs now, in its order. */
  thaw(a: Actor): void {
    if (!a.frozen) return;
    a.frozen = false;
    for (const e of a.deferred.splice(0)) {
      e.at = this.now;
      e.seq = this.#seq++;
      this.#push(e);
    }
  }

  kill(a: Actor): void {
    a.dead = true;
    a.deferred.length = 0;
  }

  /** The clock the code of `actor` runs on. */
  clockOf(a: Actor): Clock {
    const sim = this;
    return {
      now: () => EPOCH_MS + sim.now + a.wallStep,
      mono: () => sim.now,
      setTimeout: (fn, ms) => sim.at(ms, fn, a),
      sleep: (ms) => new Promise<void>((r) => sim.at(ms, r, a)),
      yield: () => new Promise<void>((r) => sim.at(0, r, a)),
    };
  }

  /**
   * Fires events until `done()` or virtual time passes `untilMs`. Between events the microtasks
   * settle (one macrotask turn), so whatever the last event started runs as far as it can.
   */
  async run(untilMs: number, done: () => boolean = () => false): Promise<void> {
    for (;;) {
      await new Promise<void>((r) => setImmediate(r));
      if (done()) return;
      const e = this.#pop();
      if (!e) return;
      if (e.at > untilMs) {
        this.#push(e);
        this.now = untilMs;
        return;
      }
      this.now = Math.max(this.now, e.at);
      if (e.cancelled) continue;
      if (e.actor?.dead) continue;
      if (e.actor?.frozen) {
        e.actor.deferred.push(e);
        continue;
      }
      this.fired++;
      this.onFire(e.actor);
      e.fn();
    }
  }

  #push(e: SimEvent): void {
    const h = this.#heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  #pop(): SimEvent | undefined {
    const h = this.#heap;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < h.length && before(h[l]!, h[m]!)) m = l;
        if (r < h.length && before(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
