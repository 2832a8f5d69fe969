/**
 * The resident memory a worker is sized to stay under, from its own settings: what
 * `cdr_worker_memory_bound_bytes` exports and the CdrWorkerMemoryNearBound alert compares RSS
 * with, so the alert follows BATCH_SIZE, BATCH_BACKLOG_ROWS, BATCH_MAX_BYTES, FLUSH_CONCURRENCY and PHONE_CACHE_SIZE
 * instead of one fixed number (docs/internals.md "Memory, in bytes").
 *
 *   bound = 160 MiB + 512 B × PHONE_CACHE_SIZE
 *           + (FLUSH_CONCURRENCY + 1) × max(2 × BATCH_MAX_BYTES, 4 KiB × max(BATCH_SIZE, BATCH_BACKLOG_ROWS))
 *
 * 160 MiB is the runtime, librdkafka's queues and the DLQ sends awaited (2 × 32 MiB); a phone
 * verdict kept costs about 116 bytes of heap with a digit key (measured over 200,000 of them), more
 * with a text key of up to 64 characters: 0.5 KiB of RSS is counted for each; each batch slot holds
 * at most its bytes twice (insert body and payloads, then the copy sent) or, for many small
 * records, 4 KiB a row: scripts/bench/memory.ts measured 1,516–3,715 bytes of RSS a held row of
 * 256-byte records (the most with 2,008 rows held, the worker's fixed costs spread over few rows),
 * and 4 KiB is the most with a 10 % margin. Larger records cost more a row (4,349–5,781 bytes for
 * 1,766-byte records), but their batch seals at BATCH_MAX_BYTES first: ≈4,750 such rows, 26 MiB,
 * within 2 × BATCH_MAX_BYTES. About 280 MiB at the defaults.
 */
const MiB = 1024 * 1024;
export const BASE_BYTES = 160 * MiB;
export const HEAP_BYTES_PER_ROW = 4 * 1024;
export const BYTES_PER_PHONE_VERDICT = 512;

export function memoryBoundBytes(
  batch: { size: number; backlogRows?: number; maxBytes: number; concurrency: number },
  phoneCacheSize: number,
): number {
  const rows = Math.max(batch.size, batch.backlogRows ?? 0);
  return (
    BASE_BYTES +
    BYTES_PER_PHONE_VERDICT * phoneCacheSize +
    (batch.concurrency + 1) * Math.max(2 * batch.maxBytes, HEAP_BYTES_PER_ROW * rows)
  );
}
