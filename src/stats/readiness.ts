/**
 * Whether the worker should receive traffic (/readyz), from what it knows in memory. Pure: the
 * table test in test/stats/readiness.test.ts covers each rule. A worker that silently stops
 * committing while records wait is not ready either: its consumer or its flushes are stuck,
 * which no other signal shows (a stuck worker still answers /healthz).
 */

/** Longest a worker may commit nothing while records wait before it says so: above the worst
 *  healthy pause, the retry budget with timeouts (3 attempts × 10 s + backoff) and a flush interval. */
export const COMMIT_STALL_MS = 120_000;

export interface ReadinessInput {
  assigned: boolean;
  /**
   * ClickHouseWriter.health: an endpoint answers; inserts are not failing; the refusal of the worker
   * (its credentials, grants, table) that makes them fail, where one does.
   */
  clickhouse: {
    reachable: boolean;
    inserting: boolean;
    refusal?: { endpoint: string; code: number | null; type: string | null } | null;
  };
  state: string;
  /** Records consumed and not yet durable, plus known lag of the owned partitions. */
  waiting: number;
  /** Last successful commit, or the start of the worker when none yet (ms since the epoch). */
  lastProgressAt: number;
  now: number;
}

export function readiness(i: ReadinessInput): { ready: boolean; reasons: string[] } {
  const reasons: string[] = [];
  if (!i.assigned) reasons.push("no Kafka partition assignment yet");
  if (!i.clickhouse.reachable) reasons.push("ClickHouse does not answer ping");
  const refusal = i.clickhouse.refusal;
  if (refusal) {
    const code = `code ${refusal.code ?? "?"}${refusal.type ? ` (${refusal.type})` : ""}`;
    reasons.push(`ClickHouse at ${refusal.endpoint} refuses the worker: ${code}`);
  } else if (!i.clickhouse.inserting) reasons.push("ClickHouse inserts failing (retrying)");
  if (i.state === "tripped") reasons.push("DLQ circuit breaker tripped");
  if (i.state !== "running" && i.state !== "tripped") reasons.push(`worker ${i.state}`);
  const stalled = i.now - i.lastProgressAt;
  if (i.state === "running" && i.waiting > 0 && stalled > COMMIT_STALL_MS) {
    reasons.push(`no commit for ${Math.round(stalled / 1000)} s while ${i.waiting} records wait`);
  }
  return { ready: reasons.length === 0, reasons };
}
