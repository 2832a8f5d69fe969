/**
 * Inserting a batch's rows so that none is stored twice when an answer is lost. ClickHouse may
 * store an insert and its answer never arrive (a reset after the server read the body, an answer
 * later than the request timeout): sending the same rows again would store them twice. So after
 * any failure that may have stored rows, the next send of those rows first ends the failed insert
 * on its endpoint (KILL QUERY … SYNC: one still running could store after the read), then reads
 * which of them ClickHouse holds (by provenance and cdr_id, at the sorting key's session_start_time
 * seconds: writer.ts's RowLookup), and sends only the rest. A range whose rows are all stored
 * succeeds without a send.
 *
 * When the check itself cannot run (ClickHouse does not answer), the rows stay unchecked and the
 * retry policy's next attempt checks first; the rows the retries never got stored take the spec's
 * exhausted path, and `storedAfterAll` tells the flush stage which of them ClickHouse holds.
 */
import type { Batch } from "../batch/batch.ts";
import { ClickHouseInsertError, classifyInsertError, HeldCheckError } from "../../clickhouse/insert-error.ts";
import { saysNothingOfRows } from "../../clickhouse/insert-error.ts";
import type { InsertRange } from "../../clickhouse/store.ts";
import type { ClickHouseWriter } from "../../clickhouse/writer.ts";
import { storedRowKey, type RowLookup } from "../../clickhouse/row-lookup.ts";
import { log } from "../../log.ts";

export interface InsertOnce {
  insert: InsertRange;
  /** Row i is known to be stored: never sent again, never dead-lettered. */
  stored(i: number): boolean;
  /** Answers lost and checked so far, and rows found stored by those checks and by the unsure rows' look-up. */
  readonly lost: number;
  readonly foundStored: number;
  /** Checks a failed attempt not yet checked, if it can: before the exhausted path dead-letters rows. */
  settle(): Promise<void>;
}

/**
 * `admit` is awaited before each send and throws when the batch may no longer be sent (lost
 * partitions); it resolves to the time the send's request must end by, if any (the lease's end).
 */
export function insertOnce(
  batch: Batch,
  writer: ClickHouseWriter,
  admit: () => Promise<number | undefined | void> = async () => {},
): InsertOnce {
  const stored = new Uint8Array(batch.count);
  // Failed attempts not yet checked, and the rows they carried. Rows a partition's last owner may
  // have stored (Batch.unsure) start out so, with no attempt of this worker's to end.
  let unchecked: { attempts: ClickHouseInsertError["attempts"]; rows: number[] } | null = unsureRows(batch);
  const state = { lost: 0, foundStored: 0 };
  // Endpoints where this batch's sends failed after they may have stored: its next sends try the
  // others first, so its retries reach every endpoint before one is tried again.
  const failedEndpoints = new Set<number>();

  const check = async (): Promise<void> => {
    const { attempts, rows } = unchecked!;
    await writer.endInserts(attempts);
    const found = await writer.storedRows(lookupOf(batch, rows), attempts[0]?.endpoint);
    let n = 0;
    for (const i of rows)
      if (found.has(keyOf(batch, i))) {
        stored[i] = 1;
        n++;
      }
    unchecked = null;
    state.foundStored += n;
    if (attempts.length === 0) {
      log.info("rows a partition's last owner may have stored were looked up; only those it did not store go", {
        rows: rows.length,
        stored: n,
      });
      return;
    }
    state.lost++;
    log.warn("a ClickHouse insert failed after it may have been stored; only rows it did not store go again", {
      rows: rows.length,
      stored: n,
    });
  };

  /**
   * The check, failing as an insert would: a ClickHouse that does not answer is `unreachable`, so the
   * retry policy waits for it under CH_UNREACHABLE_POLICY=wait instead of spending attempts; a check
   * only the silent endpoint that took the insert can answer, while others answer, is `held`, and
   * waited for under either policy (running-inserts.ts's end bounds how long).
   */
  const checkOrFail = async (): Promise<void> => {
    try {
      await check();
    } catch (err) {
      const what = "reading what an insert whose answer was lost stored";
      const held = err instanceof HeldCheckError;
      const c = classifyInsertError(held ? err.cause : err, what);
      const message = held ? `${what}: ${err.message}` : c.message;
      const failure = new ClickHouseInsertError(message, "transient", { code: c.serverCode }, {
        cause: err,
        // A condition of the server's or a refusal of the worker (insert-error.ts) answers nothing of
        // the rows: waited out too.
        unreachable: !held && saysNothingOfRows(c),
        mayHaveStored: true,
        held,
      });
      failure.attempts = unchecked?.attempts ?? [];
      throw failure;
    }
  };

  const insert: InsertRange = async (lo, hi) => {
    for (let attempt = 0; ; attempt++) {
      if (unchecked) await checkOrFail();
      const rows: number[] = [];
      for (let i = lo; i < hi; i++) if (!stored[i]) rows.push(i);
      if (rows.length === 0) return;
      await admit();
      try {
        // Admitted again right before each send, on every endpoint (after any wait for its version).
        await writer.insert(bodyOf(batch, rows, lo, hi), rows.length, admit, failedEndpoints);
        return;
      } catch (e) {
        if (!(e instanceof ClickHouseInsertError) || !e.mayHaveStored) throw e;
        unchecked = { attempts: e.attempts, rows };
        for (const a of e.attempts) failedEndpoints.add(a.endpoint);
        // A reset is most often a kept-alive socket the server had closed: checked, then sent again at
        // once rather than after a retry delay.
        if (attempt > 0 || !isReset(e.cause)) throw e;
        await checkOrFail();
      }
    }
  };

  return {
    insert,
    stored: (i) => stored[i] === 1,
    settle: async () => {
      if (!unchecked) return;
      const { attempts, rows } = unchecked;
      // Unknown still (ClickHouse does not answer): the spec's exhausted path dead-letters the rows,
      // which may also be stored (docs/internals.md "Stored and dead-lettered"). The line names
      // them, so that an operator can look them up in the table.
      const what =
        attempts.length > 0
          ? "a ClickHouse insert's answer was lost and what it stored cannot be read; its rows"
          : "rows a partition's last owner may have stored cannot be read; they";
      await check().catch((err) =>
        log.error(`${what} go to the DLQ and may also be stored`, {
          rows: rows.length,
          offsets: offsetRanges(batch, rows),
          err: err as Error,
        }),
      );
    },
    get lost() {
      return state.lost;
    },
    get foundStored() {
      return state.foundStored;
    },
  };
}

/** The body of these rows: a view when they are the whole range, else their slices copied together. */
function bodyOf(batch: Batch, rows: number[], lo: number, hi: number): Uint8Array {
  if (rows.length === hi - lo) return batch.rows(lo, hi);
  const parts = rows.map((i) => batch.rows(i, i + 1));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function unsureRows(batch: Batch): { attempts: ClickHouseInsertError["attempts"]; rows: number[] } | null {
  const rows: number[] = [];
  for (let i = 0; i < batch.count; i++) if (batch.unsure[i]) rows.push(i);
  return rows.length > 0 ? { attempts: [], rows } : null;
}

/** The rows' records as `partition:first-last` (offsets, inclusive), one a partition, for a log line. */
function offsetRanges(batch: Batch, rows: readonly number[]): string[] {
  const spans = new Map<number, [number, number]>();
  for (const i of rows) {
    const p = batch.partitions[i]!, o = batch.offsets[i]!;
    const s = spans.get(p);
    if (!s) spans.set(p, [o, o]);
    else [s[0], s[1]] = [Math.min(s[0], o), Math.max(s[1], o)];
  }
  return [...spans].sort((a, b) => a[0] - b[0]).map(([p, [lo, hi]]) => `${p}:${lo}-${hi}`);
}

function lookupOf(batch: Batch, rows: number[]): RowLookup {
  let minOffset = Infinity, maxOffset = -Infinity;
  const partitions = new Set<number>();
  const starts = new Set<number>();
  for (const i of rows) {
    partitions.add(batch.partitions[i]!);
    minOffset = Math.min(minOffset, batch.offsets[i]!);
    maxOffset = Math.max(maxOffset, batch.offsets[i]!);
    starts.add(batch.sessionStarts[i]!);
  }
  return { partitions: [...partitions], minOffset, maxOffset, starts: [...starts] };
}

/** Row i as a lookup finds it stored: its provenance, its cdr_id and its second. */
function keyOf(batch: Batch, i: number): string {
  return storedRowKey(batch.partitions[i]!, batch.offsets[i]!, batch.cdrId(i), batch.sessionStarts[i]!);
}

function isReset(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE" || (e instanceof Error && /socket hang up/i.test(e.message));
}
