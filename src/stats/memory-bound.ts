/**
 * The resident memory a worker is sized to stay under, from its own settings: what
 * `cdr_worker_memory_bound_bytes` exports and the CdrWorkerMemoryNearBound alert compares RSS
 * with, so the alert follows BATCH_SIZE, BATCH_MAX_BYTES and FLUSH_CONCURRENCY instead of one
 * fixed number (README "Memory, in bytes").
 *
 *   bound = 184 MiB + (FLUSH_CONCURRENCY + 1) × max(2 × BATCH_MAX_BYTES, 8 KiB × BATCH_SIZE)
 *
 * 184 MiB is the runtime, librdkafka's queues and the DLQ sends awaited (2 × 32 MiB); each batch
 * slot holds at most its bytes twice (insert body and payloads, then the copy sent) or, for many
 * small records, about 8 KiB a row of heap: three times what measured RSS grows by per row of
 * BATCH_SIZE (≈170 MiB at 1000, ≈240 MiB at 10000 with three slots). 280 MiB at the defaults.
 */
const MiB = 1024 * 1024;
export const BASE_BYTES = 184 * MiB;
export const HEAP_BYTES_PER_ROW = 8 * 1024;

export function memoryBoundBytes(batch: { size: number; maxBytes: number; concurrency: number }): number {
  return BASE_BYTES + (batch.concurrency + 1) * Math.max(2 * batch.maxBytes, HEAP_BYTES_PER_ROW * batch.size);
}
