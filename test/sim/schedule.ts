/**
 * A simulation run as data: the world (workers, endpoints, records, policy) and the faults with
 * their instants, all in virtual milliseconds from the run's start. A run is a function of its
 * schedule, so a schedule is the whole of a finding: fast-check draws and shrinks them, and a
 * fixture (test/sim/fixtures/) is one kept as JSON.
 */
import fc from "fast-check";

export type Fault =
  /** kill -9 of the worker in `worker`'s slot; a new process starts there `restartMs` later. */
  | { kind: "crash"; at: number; worker: number; restartMs: number }
  /**
   * The whole process stops (SIGSTOP) for `ms`: no timer, no heartbeat, answers wait. With
   * `atAnswer` k > 0 it stops as the k-th ClickHouse answer from `at` on reaches it, before it reads it.
   */
  | { kind: "freeze"; at: number; worker: number; ms: number; atAnswer?: number }
  /** Packets between the worker and every broker are dropped for `ms`; ClickHouse still answers it. */
  | { kind: "kafka-cut"; at: number; worker: number; ms: number }
  /** Packets between the worker and one endpoint are dropped for `ms`. */
  | { kind: "ch-cut"; at: number; worker: number; endpoint: number; ms: number }
  /** Inserts on the endpoint store their rows and lose their answers (a reset) for `ms`. */
  | { kind: "lost-answers"; at: number; endpoint: number; ms: number }
  /** The endpoint refuses connections for `ms`. */
  | { kind: "endpoint-down"; at: number; endpoint: number; ms: number }
  /** The endpoint refuses inserts without storing them (TOO_MANY_PARTS) for `ms`. */
  | { kind: "refuse"; at: number; endpoint: number; ms: number }
  /** Inserts on the endpoint run 1–15 s for `ms`. */
  | { kind: "slow"; at: number; endpoint: number; ms: number }
  /** The offsets view fails after the table's write for `ms`. */
  | { kind: "view-fails"; at: number; endpoint: number; ms: number }
  /** Every broker stops for `ms`; the coordinator then loads its groups for a second. */
  | { kind: "broker-restart"; at: number; ms: number }
  /** The worker stops gracefully (SIGTERM) and a new process starts in its slot `restartMs` later. */
  | { kind: "restart"; at: number; worker: number; restartMs: number }
  /**
   * For `ms`, the coordinator's answers to the worker's `request`s are lost after the request took
   * effect (EndTxn written, TxnOffsetCommit stored): the outcome is the worker's to learn.
   */
  | { kind: "txn-answers-lost"; at: number; worker: number; ms: number; request: "EndTxn" | "TxnOffsetCommit" }
  /** The worker's wall clock steps by `ms` (either way); its monotonic clock does not. */
  | { kind: "clock-step"; at: number; worker: number; ms: number }
  /**
   * For `ms`, every answer the brokers send the worker comes `extraMs` late (a far broker, a quota):
   * its heartbeats are answered after the statistics interval, its commits and produces slowly.
   */
  | { kind: "slow-answers"; at: number; worker: number; ms: number; extraMs: number };

export interface Schedule {
  /** Seeds the services' latencies and the records. */
  seed: number;
  workers: number;
  endpoints: number;
  records: number;
  /** Share of records with a defect (they go to the DLQ). */
  invalidShare: number;
  /** Records are produced evenly over this long. */
  produceMs: number;
  /** A valid record with epoch_start 0 among them. */
  epochZero: boolean;
  policy: "dlq" | "wait";
  /**
   * An incident's instant: when set, every fault falls within 2 s before to 6 s after it (its `at`
   * taken modulo 8 s), so that faults meet; otherwise each falls where its `at` says.
   */
  focus: number | null;
  faults: Fault[];
  /**
   * The ClickHouse release the endpoints run: 18.16 runs an insert past its max_execution_time,
   * 26.9 ends it there (test/clickhouse/insert-life.test.ts). Absent: 18.16.
   */
  clickhouse?: "18.16.1" | "26.9.2.1";
  /** The group's protocol (kafka.ts): classic eager, cooperative-sticky, or KIP-848's consumer. Absent: eager. */
  protocol?: "eager" | "cooperative" | "consumer";
}

/** When the last fault is over. */
export function faultsEnd(s: Schedule): number {
  let end = 0;
  for (const f of s.faults) {
    const len = "ms" in f ? Math.abs(f.ms) : 0;
    const restart = "restartMs" in f ? f.restartMs : 0;
    end = Math.max(end, f.at + (f.kind === "clock-step" ? 0 : len) + restart);
  }
  return end;
}

const at = fc.integer({ min: 1_000, max: 25_000 });
const worker = fc.integer({ min: 0, max: 2 });
const endpoint = fc.integer({ min: 0, max: 2 });
const short = fc.integer({ min: 200, max: 8_000 });
const long = fc.integer({ min: 2_000, max: 40_000 });

export const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.record({ kind: fc.constant("crash" as const), at, worker, restartMs: fc.integer({ min: 100, max: 15_000 }) }),
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("freeze" as const), at, worker, ms: long, atAnswer: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("kafka-cut" as const), at, worker, ms: long }) },
  fc.record({ kind: fc.constant("ch-cut" as const), at, worker, endpoint, ms: long }),
  fc.record({ kind: fc.constant("lost-answers" as const), at, endpoint, ms: short }),
  fc.record({ kind: fc.constant("endpoint-down" as const), at, endpoint, ms: long }),
  fc.record({ kind: fc.constant("refuse" as const), at, endpoint, ms: long }),
  fc.record({ kind: fc.constant("slow" as const), at, endpoint, ms: long }),
  fc.record({ kind: fc.constant("view-fails" as const), at, endpoint, ms: short }),
  fc.record({ kind: fc.constant("broker-restart" as const), at, ms: short }),
  fc.record({ kind: fc.constant("restart" as const), at, worker, restartMs: fc.integer({ min: 100, max: 5_000 }) }),
  fc.record({ kind: fc.constant("clock-step" as const), at, worker, ms: fc.integer({ min: -120_000, max: 120_000 }) }),
  fc.record({ kind: fc.constant("slow-answers" as const), at, worker, ms: long, extraMs: fc.integer({ min: 300, max: 4_000 }) }),
  fc.record({
    kind: fc.constant("txn-answers-lost" as const),
    at,
    worker,
    ms: short,
    request: fc.constantFrom("EndTxn" as const, "TxnOffsetCommit" as const),
  }),
);

export const scheduleArb: fc.Arbitrary<Schedule> = fc.record({
  seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  workers: fc.integer({ min: 1, max: 3 }),
  endpoints: fc.integer({ min: 1, max: 3 }),
  records: fc.integer({ min: 50, max: 1_500 }),
  invalidShare: fc.constantFrom(0, 0.05, 0.2),
  produceMs: fc.integer({ min: 1_000, max: 30_000 }),
  epochZero: fc.boolean(),
  policy: fc.constantFrom("dlq" as const, "wait" as const),
  focus: fc.option(fc.integer({ min: 2_000, max: 20_000 }), { nil: null, freq: 2 }),
  faults: fc.array(faultArb, { minLength: 1, maxLength: 6 }),
  clickhouse: fc.constantFrom("18.16.1" as const, "26.9.2.1" as const),
  protocol: fc.constantFrom("eager" as const, "cooperative" as const, "consumer" as const),
});

/**
 * The schedule as it runs: a fault names a worker or endpoint the world has (others are folded onto
 * it), and a focused schedule's instants are placed around its focus.
 */
export function normalize(s: Schedule): Schedule {
  return {
    ...s,
    focus: null,
    faults: s.faults.map((f) => ({
      ...f,
      ...(s.focus !== null ? { at: s.focus - 2_000 + (f.at % 8_000) } : {}),
      ...("worker" in f ? { worker: f.worker % s.workers } : {}),
      ...("endpoint" in f ? { endpoint: f.endpoint % s.endpoints } : {}),
    })) as Fault[],
  };
}
