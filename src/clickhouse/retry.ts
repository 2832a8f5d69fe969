/** Attempts with exponential backoff: delay(n) = initial × factor^(n−1) before attempt n+1. */

export interface RetryPolicy {
  maxAttempts: number;
  initialDelayMs: number;
  backoffFactor: number;
  /**
   * While no endpoint answers at all (an error with `unreachable`): "dlq" spends attempts like any
   * transient failure (the spec); "wait" spends none and waits, the delay capped at
   * MAX_WAIT_DELAY_MS, until an endpoint answers (CH_UNREACHABLE_POLICY).
   */
  whenUnreachable?: "dlq" | "wait";
}

/** Longest pause between two tries while waiting for an unreachable ClickHouse; shortest too. */
export const MAX_WAIT_DELAY_MS = 5_000;
const MIN_WAIT_DELAY_MS = 100;

export type RetryOutcome = { ok: true; attempts: number } | { ok: false; attempts: number; error: unknown };

/** Delay before attempt `attempt + 1`, after `attempt` failures (attempt ≥ 1). */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  return policy.initialDelayMs * policy.backoffFactor ** (attempt - 1);
}

/**
 * The longest one insert's attempts take when every one fails slowly: each attempt up to
 * `attemptMs`, and the delays between them. A stop that is to end an insert under way needs as
 * long (SHUTDOWN_TIMEOUT_SECONDS).
 */
export function retryBudgetMs(policy: RetryPolicy, attemptMs: number): number {
  let total = policy.maxAttempts * attemptMs;
  for (let attempt = 1; attempt < policy.maxAttempts; attempt++) total += backoffDelay(policy, attempt);
  return total;
}

/**
 * Runs `fn` up to maxAttempts times while its errors say a retry can help (`retryable`; an error
 * without the flag counts as retryable). An error that is `held` spends no attempt, under either
 * policy. `onRetry` hears each failure that will be retried;
 * `onWaiting` hears true when a wait for an unreachable ClickHouse begins and false when it ends.
 * Never throws: exhausting the attempts, or an error no retry helps, is an outcome the caller routes.
 */
export async function withRetry(
  policy: RetryPolicy,
  fn: (attempt: number) => Promise<void>,
  onRetry: (attempt: number, error: unknown, delayMs: number) => void = () => {},
  sleep: (ms: number) => Promise<void> = Bun.sleep,
  onWaiting: (waiting: boolean) => void = () => {},
): Promise<RetryOutcome> {
  let error: unknown;
  let waits = 0;
  let holds = 0;
  try {
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      try {
        await fn(attempt);
        return { ok: true, attempts: attempt };
      } catch (e) {
        error = e;
        if (isHeld(e)) {
          // A lost answer's check waiting for the one endpoint that can answer it, while others
          // answer: not a failure of ClickHouse's, and bounded by the writer (endInserts).
          attempt--;
          const delay = Math.min(MAX_WAIT_DELAY_MS, Math.max(MIN_WAIT_DELAY_MS, backoffDelay(policy, ++holds)));
          await sleep(delay);
          continue;
        }
        if (policy.whenUnreachable === "wait" && isUnreachable(e)) {
          if (waits++ === 0) onWaiting(true);
          attempt--; // not spent: nobody refused, nobody answered
          const delay = Math.min(MAX_WAIT_DELAY_MS, Math.max(MIN_WAIT_DELAY_MS, backoffDelay(policy, waits)));
          await sleep(delay);
          continue;
        }
        if (attempt === policy.maxAttempts || !canRetry(e)) return { ok: false, attempts: attempt, error };
        const delay = backoffDelay(policy, attempt);
        onRetry(attempt, e, delay);
        await sleep(delay);
      }
    }
    return { ok: false, attempts: policy.maxAttempts, error };
  } finally {
    if (waits > 0) onWaiting(false);
  }
}

function isHeld(e: unknown): boolean {
  return (e as { held?: unknown } | null)?.held === true;
}

function isUnreachable(e: unknown): boolean {
  return (e as { unreachable?: unknown } | null)?.unreachable === true;
}

function canRetry(e: unknown): boolean {
  const flag = (e as { retryable?: unknown } | null)?.retryable;
  return typeof flag === "boolean" ? flag : true;
}
