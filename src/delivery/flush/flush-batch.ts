/**
 * The flush stage: a sealed batch into ClickHouse (clickhouse/store.ts isolates the rows it
 * refuses and retries what is transient), every row it did not take into the DLQ, and the
 * counters updated. Resolves when both destinations acknowledged; a DLQ failure rejects (fatal).
 * Once `signal` aborts (the partitions were lost) it sends nothing more, to either, and resolves:
 * the rows are the next owner's.
 */
import type { Batch } from "../batch/batch.ts";
import { systemClock, type Clock } from "../../time/clock.ts";
import type { RetryPolicy } from "../../clickhouse/retry.ts";
import { storeBatch, type StoreOutcome } from "../../clickhouse/store.ts";
import type { ClickHouseWriter } from "../../clickhouse/writer.ts";
import type { DlqPublisher, SourceRecord } from "../../dlq/publisher.ts";
import { AssignmentLostError } from "../../errors.ts";
import { LineLimit, log } from "../../log.ts";
import type { Counters } from "../../stats/counters.ts";
import { insertOnce } from "./insert-once.ts";

/** A refused row is said as an example, at most ten a minute (clickhouse_refused_rows counts them all). */
const REFUSED_ROW_LINE = new LineLimit();

export interface FlushDeps {
  writer: ClickHouseWriter;
  dlq: DlqPublisher;
  counters: Counters;
  /** The raw topic, for the DLQ's provenance headers. */
  topic: string;
  retry: RetryPolicy;
  /** Hears when this batch starts and stops waiting for an unreachable ClickHouse. */
  onWaiting: (waiting: boolean) => void;
  /** Awaited before each insert is sent; throws once the partitions were lost. */
  /** Before each insert's send; resolves to the time (monotonic ms) its request must end by, if any. */
  admit: (signal: AbortSignal) => Promise<number | undefined | void>;
  /**
   * Exactly-once: awaited before any of the batch's rows goes to the DLQ, until every record before
   * the batch is durable, so the commit of the envelopes' transaction passes them.
   */
  envelopesReady?: (batch: Batch, signal: AbortSignal) => Promise<void>;
  /** Awaited before the batch's rows go to the DLQ, if not `admit`: exactly-once's transactions need no lease. */
  admitEnvelopes?: (signal: AbortSignal) => Promise<void>;
  clock?: Clock;
  /** Hears how many of the batch's rows were stored and how many went to the DLQ (the breaker). */
  onSettled?: (stored: number, dead: number) => void;
  /**
   * The DLQ breaker's say before a batch's rows go to the DLQ (Delivery): resolves true to hold the
   * batch and try it again (its envelopes would trip the breaker), false to send them. `taken` hears
   * that a batch held was then taken whole.
   */
  holdBatch?: (stored: number, dead: number, signal: AbortSignal) => Promise<boolean>;
  heldTaken?: () => void;
}

export async function flushBatch(
  batch: Batch,
  d: FlushDeps,
  signal = new AbortController().signal,
): Promise<void> {
  const clock = d.clock ?? systemClock;
  const started = clock.mono();
  const once = insertOnce(batch, d.writer, () => d.admit(signal));
  const store = () =>
    storeBatch(batch.count, once.insert, d.retry, {
      sleep: (ms) => sleepUnless(ms, signal, clock),
      onRetry: (attempt, error, delayMs) => {
        d.counters.chRetries++;
        log.warn("ClickHouse insert failed; retrying", {
          attempt,
          delay_ms: delayMs,
          rows: batch.count,
          err: error as Error,
        });
      },
      onWaiting: (waiting) => d.onWaiting(waiting),
    });
  let outcome = await store();
  // A lost answer's rows may be stored after all: asked once more before any goes to the DLQ.
  if (outcome.failed && !signal.aborted) await once.settle();
  // Envelopes that would trip the DLQ breaker wait: the batch is tried again (the rows stored stay
  // so, insertOnce skips them) until ClickHouse takes it whole, or the operator's word sends them.
  let held = false;
  while (d.holdBatch && !signal.aborted) {
    const dead = deadRows(outcome, once);
    if (dead === 0) break;
    if (!(await d.holdBatch(batch.count - dead, dead, signal))) break;
    held = true;
    const again = await store();
    const [inserted, splitInserts] = [outcome.inserted + again.inserted, outcome.splitInserts + again.splitInserts];
    outcome = { ...again, inserted, splitInserts };
    if (outcome.failed && !signal.aborted) await once.settle();
  }
  if (held && deadRows(outcome, once) === 0) d.heldTaken?.();
  const failed = outcome.failed;
  d.counters.chAnswersLost += once.lost;
  // Nothing of the batch goes to the DLQ unless the worker still owns its partitions, asked after
  // the last read and right before the sends: a worker frozen past its session that thaws with its
  // retries spent (or its check's answer) hears the group first (lease.ts), as a successor may
  // have stored these very rows meanwhile.
  if (!signal.aborted && (failed || outcome.refused.length > 0)) {
    await d.envelopesReady?.(batch, signal);
    await (d.admitEnvelopes ?? d.admit)(signal).catch((e) => {
      if (!(e instanceof AssignmentLostError)) throw e;
    });
  }
  if (signal.aborted) {
    log.warn("a batch of lost partitions was dropped; their next owner replays it", { rows: batch.count });
    return;
  }
  const sends: Promise<void>[] = [];
  const notInserted: number[] = [];
  for (const { row, error } of outcome.refused) {
    notInserted.push(row);
    const fields = REFUSED_ROW_LINE.take({
      partition: batch.partitions[row],
      offset: batch.offsets[row],
      column: error.column,
      err: error,
    });
    if (fields) log.warn("ClickHouse refused a row; it goes to the DLQ alone", fields);
    sends.push(d.dlq.publishRefused(sourceRecord(batch, row), d.topic, error.column, error.message));
  }
  if (failed) {
    const records: SourceRecord[] = [];
    for (const [lo, hi] of failed.ranges) {
      for (let i = lo; i < hi; i++) {
        if (once.stored(i)) continue;
        notInserted.push(i);
        records.push(sourceRecord(batch, i));
      }
    }
    // Every row of the failed ranges may turn out stored after all: then nothing goes to the DLQ.
    if (records.length > 0) {
      log.error("ClickHouse insert failed; routing the batch's records to the DLQ", {
        attempts: failed.attempts,
        rows: records.length,
        err: failed.error as Error,
      });
      sends.push(d.dlq.publishStorageFailure(records, d.topic, failed.attempts, failed.error));
    }
  }
  notInserted.sort((a, b) => a - b);
  d.counters.recordFlush(batch, outcome, notInserted, (clock.mono() - started) / 1000);
  await Promise.all(sends);
  d.counters.recordStoredInDlq(batch, notInserted, outcome.refused.length, d.dlq.storageFailureReason);
  d.onSettled?.(batch.count - notInserted.length, notInserted.length);
}

/** The rows that would go to the DLQ: refused alone, or in a failed range and not stored after all. */
function deadRows(outcome: StoreOutcome, once: { stored: (i: number) => boolean }): number {
  let dead = outcome.refused.length;
  for (const [lo, hi] of outcome.failed?.ranges ?? []) for (let i = lo; i < hi; i++) if (!once.stored(i)) dead++;
  return dead;
}

/** A retry's pause, cut short when the partitions are lost: the next attempt then ends the batch. */
function sleepUnless(ms: number, signal: AbortSignal, clock: Clock): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      cancel();
      signal.removeEventListener("abort", done);
      resolve();
    };
    const cancel = clock.setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });
}

function sourceRecord(batch: Batch, i: number): SourceRecord {
  return { payload: batch.payload(i), partition: batch.partitions[i]!, offset: batch.offsets[i]! };
}
