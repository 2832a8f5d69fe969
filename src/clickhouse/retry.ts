/** Attempts with exponential backoff: delay(n) = initial × factor^(n−1) before attempt n+1. */

export interface RetryPolicy {
  maxAttempts: number;
  initialDelayMs: number;
  backoffFactor: number;
}

export type RetryOutcome = { ok: true; attempts: number } | { ok: false; attempts: number; error: unknown };

/** Delay before attempt `attempt + 1`, after `attempt` failures (attempt ≥ 1). */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  return policy.initialDelayMs * policy.backoffFactor ** (attempt - 1);
}

/**
 * Runs `fn` up to maxAttempts times while its errors say a retry can help (`retryable`; an error
 * without the flag counts as retryable). `onRetry` hears each failure that will be retried.
 * Never throws: exhausting the attempts, or an error no retry helps, is an outcome the caller routes.
 */
export async function withRetry(
  policy: RetryPolicy,
  fn: (attempt: number) => Promise<void>,
  onRetry: (attempt: number, error: unknown, delayMs: number) => void = () => {},
  sleep: (ms: number) => Promise<void> = Bun.sleep,
): Promise<RetryOutcome> {
  let error: unknown;
  for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
    try {
      await fn(attempt);
      return { ok: true, attempts: attempt };
    } catch (e) {
      error = e;
      if (attempt === policy.maxAttempts || !canRetry(e)) return { ok: false, attempts: attempt, error };
      const delay = backoffDelay(policy, attempt);
      onRetry(attempt, e, delay);
      await sleep(delay);
    }
  }
  return { ok: false, attempts: policy.maxAttempts, error };
}

function canRetry(e: unknown): boolean {
  const flag = (e as { retryable?: unknown } | null)?.retryable;
  return typeof flag === "boolean" ? flag : true;
}
