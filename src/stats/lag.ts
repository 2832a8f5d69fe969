/**
 * A partition's lag: records not yet committed, the high watermark minus the committed offset,
 * where both are known (null otherwise: a partition nothing was committed for, or whose watermark
 * the fetcher has not seen). Stats, metrics and readiness all read it here.
 */
export function partitionLag(high: number | null, committed: number | null): number | null {
  return high !== null && committed !== null && committed >= 0 ? Math.max(0, high - committed) : null;
}
