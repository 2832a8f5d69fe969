// Lag in time against the real broker: a worker whose breaker tripped consumes nothing more, its
// cached watermarks stop, and the records behind its commits age. Their age is read apart at the
// committed offsets (LAG_TIME_INTERVAL_SECONDS) and shown per partition beside the raw topic's
// retention, in stats and metrics; it grows with the clock while nothing commits.
import { expect, setDefaultTimeout, test } from "bun:test";
import { e2eScope } from "../support/e2e.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { explainedBy, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();

test("records left behind a tripped breaker: their age in stats and metrics, growing, beside the retention", async () => {
  const n = await names("lagtime");
  const producedFrom = Date.now();
  await produceSynthetic(n.raw, 3000, 0.9, 47);
  const producedTo = Date.now();
  const w = await startWorker(
    workerEnv(n, { DLQ_MAX_RATIO: "0.5", DLQ_RATIO_WINDOW: "200", BATCH_SIZE: "5000", LAG_TIME_INTERVAL_SECONDS: "1" }),
  );
  try {
    await explainedBy(w, async () => {
      await statsWhen(w, (s) => s.state === "tripped", 20_000, "breaker");
      type P = { lag: number | null; lag_seconds: number | null };
      const waiting = (s: any) => Object.entries(s.partitions as Record<string, P>).filter(([, p]) => (p.lag ?? 0) > 0);
      // What was handed over before the trip is delivered and committed first (its inserts wait for
      // the worker's first heartbeat proven, a few seconds after it joined); nothing after it.
      type Q = P & { in_flight: number; consumed: number; committed_offset: number | null };
      const settled = (s: any) => Object.values(s.partitions as Record<string, Q>).every((p) => p.in_flight === 0 && (p.committed_offset ?? 0) === p.consumed);
      // Every partition with records behind its commit has an age once a read has answered.
      const first = await statsWhen(
        w,
        (s) => settled(s) && waiting(s).length > 0 && waiting(s).every(([, p]) => (p.lag_seconds ?? 0) > 0),
        20_000,
        "what was handed over committed, and ages read",
      );
      const at = Date.now();
      expect(first.raw_retention_seconds).toBe(86_400);
      for (const [, p] of waiting(first)) {
        expect(p.lag_seconds!).toBeGreaterThanOrEqual((at - producedTo) / 1000 - 1.5);
        expect(p.lag_seconds!).toBeLessThanOrEqual((at - producedFrom) / 1000 + 1.5);
      }
      // Nothing commits while the breaker holds: the age grows with the clock.
      const [partition, before] = waiting(first)[0]!;
      const later = await statsWhen(w, (s) => (s.partitions[partition].lag_seconds ?? 0) >= before.lag_seconds! + 2, 20_000, "the age growing");
      expect(later.partitions[partition].committed_offset).toBe(first.partitions[partition].committed_offset);
      const metrics = await (await fetch(`${new URL(w.statsUrl).origin}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`^cdr_worker_partition_lag_seconds\\{partition="${partition}"\\} [1-9]`, "m"));
      expect(metrics).toContain("cdr_worker_raw_retention_seconds 86400");
    });
  } finally {
    expect(await w.stop()).toBe(0);
  }
});
