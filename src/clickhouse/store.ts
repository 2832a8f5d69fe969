/**
 * Stores one batch: the whole body first; when ClickHouse refuses values, only the refused rows
 * are taken out, so one bad row never costs its batch.
 *
 * - transient errors: the spec's retry with backoff (retry.ts); exhausted → the rows go the spec's
 *   way (every record to the DLQ, `failed`).
 * - data errors: the range is split until each refused row stands alone. ClickHouse's "at row N"
 *   is used first (the rows before it, the row itself, the rows after it: about three inserts
 *   per refused row), else the range is halved. A row is refused only when an insert of that row
 *   alone is refused, so a wrong hint can cost inserts, never a valid row.
 * - shape errors (too many partitions in one block): halved until the parts are accepted.
 * - configuration errors (a refusal of the worker: its credentials, grants, table) and conditions:
 *   retried whole with the policy, never split; exhausted → the spec's way (retry.ts says how the
 *   wait policy holds them).
 * Bounded: data-error splits may cost at most 2·⌈log2 n⌉ + 2 inserts per refused row found (plus
 * one row's worth to start), and at most MAX_ISOLATED rows' worth in all. Past the bound the
 * unresolved rows go the spec's way, unless no row of the batch was taken at all: then every row is
 * refused alike (a column retyped or renamed under the worker), a systematic refusal, which is a
 * condition of the configuration, not of the rows (DECISIONS "Commits and rebalances"). The first
 * refused row is then tried alone with the retry policy, as a refusal of the worker is: while it is
 * refused the batch waits (CH_UNREACHABLE_POLICY=wait) or spends the budget and goes the spec's way
 * whole; once it is taken, the rest of the batch is stored as any batch is.
 * Shape splits are not counted: they end at single rows, which never span two partitions
 * (≤ 2n − 1 inserts).
 * Pure: the insert is a function; tests drive it with a fake ClickHouse, the e2e tests with the real one.
 */
import { ClickHouseInsertError, SIZE_CODES } from "./insert-error.ts";
import { withRetry, type RetryPolicy } from "./retry.ts";

/** Inserts rows [lo, hi) of the batch; throws a ClickHouseInsertError. */
export type InsertRange = (lo: number, hi: number) => Promise<void>;

export interface Refused {
  row: number;
  error: ClickHouseInsertError;
}

export interface StoreOutcome {
  /** Rows ClickHouse acknowledged. */
  inserted: number;
  /** Rows ClickHouse refused alone, ascending. */
  refused: Refused[];
  /** Row ranges [lo, hi) that take the spec's exhausted path, with the last error and attempts. */
  failed: { ranges: Array<[number, number]>; error: unknown; attempts: number } | null;
  /** Inserts made after the first one failed with a data or shape error. */
  splitInserts: number;
}

export interface StoreHooks {
  /** A failure that will be retried after `delayMs`. */
  onRetry?: (attempt: number, error: unknown, delayMs: number) => void;
  sleep?: (ms: number) => Promise<void>;
  /** True when a wait for an unreachable ClickHouse begins (RetryPolicy.whenUnreachable), false when it ends. */
  onWaiting?: (waiting: boolean) => void;
}

/** Most refused rows' worth of isolation inserts one batch may spend. */
export const MAX_ISOLATED = 16;

/** A batch whose every row ClickHouse refused alike: the table changed under the worker. */
export class SystematicRefusalError extends ClickHouseInsertError {
  override name = "SystematicRefusalError";
  constructor(cause: ClickHouseInsertError) {
    super(
      `every row refused alike (the table changed under the worker?): ${cause.message}`,
      "configuration",
      { code: cause.serverCode, type: cause.serverType, column: cause.column },
      { cause, unreachable: true },
    );
  }
}

type Attempt = { ok: true } | { ok: false; error: unknown; attempts: number };

export async function storeBatch(
  rows: number,
  insert: InsertRange,
  policy: RetryPolicy,
  hooks: StoreHooks = {},
): Promise<StoreOutcome> {
  const out = await isolate(rows, [[0, rows]], insert, policy, hooks);
  if (!out.systematic) return out.outcome;
  return storeSystematic(rows, out.outcome, insert, policy, hooks);
}

/**
 * Every row of the batch refused alike: the first refused row is tried alone with the rest of the
 * retry budget (the whole batch spent one attempt), its data refusal counting as a refusal of the
 * worker. Taken, the rest is stored as any batch is; still refused, the whole batch goes the spec's way.
 */
async function storeSystematic(
  rows: number,
  found: StoreOutcome,
  insert: InsertRange,
  policy: RetryPolicy,
  hooks: StoreHooks,
): Promise<StoreOutcome> {
  const probe = found.refused[0]!.row;
  const rest = { ...policy, maxAttempts: Math.max(0, policy.maxAttempts - 1) };
  const r = await withRetry(
    rest,
    async () => {
      try {
        await insert(probe, probe + 1);
      } catch (e) {
        throw e instanceof ClickHouseInsertError && e.kind === "data" ? new SystematicRefusalError(e) : e;
      }
    },
    hooks.onRetry,
    hooks.sleep,
    hooks.onWaiting,
  );
  const spent = found.splitInserts + Math.max(1, r.attempts);
  if (!r.ok || rest.maxAttempts === 0) {
    const error = r.ok ? new SystematicRefusalError(found.refused[0]!.error) : r.error;
    const failed = { ranges: [[0, rows]] as Array<[number, number]>, error, attempts: 1 + r.attempts };
    return { inserted: 0, refused: [], failed, splitInserts: spent };
  }
  const ranges: Array<[number, number]> = [];
  if (probe > 0) ranges.push([0, probe]);
  if (probe + 1 < rows) ranges.push([probe + 1, rows]);
  const after = await isolate(rows, ranges, insert, policy, hooks);
  const out = after.outcome;
  out.inserted += 1;
  out.splitInserts += spent;
  return out;
}

/**
 * Stores the given row ranges of a batch, isolating refused rows within the bound (the header).
 * `systematic`: the bound was reached and no row was taken at all.
 */
async function isolate(
  rows: number,
  ranges: ReadonlyArray<[number, number]>,
  insert: InsertRange,
  policy: RetryPolicy,
  hooks: StoreHooks,
): Promise<{ outcome: StoreOutcome; systematic: boolean }> {
  const out: StoreOutcome = { inserted: 0, refused: [], failed: null, splitInserts: 0 };
  let bounded = false;
  const attempt = async (lo: number, hi: number): Promise<Attempt> => {
    const r = await withRetry(policy, () => insert(lo, hi), hooks.onRetry, hooks.sleep, hooks.onWaiting);
    return r.ok ? { ok: true } : { ok: false, error: r.error, attempts: r.attempts };
  };
  const fail = (lo: number, hi: number, a: { error: unknown; attempts: number }) => {
    out.failed ??= { ranges: [], error: a.error, attempts: a.attempts };
    out.failed.ranges.push([lo, hi]);
    out.failed.error = a.error;
    out.failed.attempts = Math.max(out.failed.attempts, a.attempts);
  };

  // Ranges known to be refused as a whole, with the error that refused them; depth first, in row order.
  const stack: Array<{ lo: number; hi: number; a: { error: unknown; attempts: number } }> = [];
  for (const [lo, hi] of ranges) {
    const first = await attempt(lo, hi);
    if (first.ok) out.inserted += hi - lo;
    else stack.push({ lo, hi, a: first });
  }
  stack.reverse();
  if (stack.length === 0) return { outcome: out, systematic: false };
  const perRefused = 2 * Math.ceil(Math.log2(Math.max(2, rows))) + 2;
  let dataSplits = 0;
  let hintsHold = true;
  while (stack.length > 0) {
    const { lo, hi, a } = stack.pop()!;
    const e = a.error;
    if (!(e instanceof ClickHouseInsertError) || (e.kind !== "data" && e.kind !== "shape")) {
      fail(lo, hi, a);
      continue;
    }
    if (hi - lo === 1) {
      // A single row never spans two partitions, so a partition shape error here is not what it
      // claims; a row too large for the server's limit alone is refused for good (DLQ, whole).
      if (e.kind === "data" || SIZE_CODES.has(e.serverCode ?? -1)) out.refused.push({ row: lo, error: e });
      else fail(lo, hi, a);
      continue;
    }
    if (e.kind === "data" && dataSplits >= perRefused * Math.min(out.refused.length + 1, MAX_ISOLATED)) {
      bounded = true;
      fail(lo, hi, a);
      continue;
    }
    const parts = e.kind === "data" && hintsHold ? partsAround(lo, hi, e.row) : halves(lo, hi);
    const refusedParts: typeof stack = [];
    for (const [plo, phi] of parts) {
      if (e.kind === "data") dataSplits++;
      out.splitInserts++;
      const r = await attempt(plo, phi);
      // The row ClickHouse named was accepted alone: its row numbers do not match this body
      // (current releases parse in parallel chunks), so halve from here on.
      if (r.ok && phi - plo === 1 && parts.length === 3) hintsHold = false;
      if (r.ok) out.inserted += phi - plo;
      else refusedParts.push({ lo: plo, hi: phi, a: r });
    }
    // Pushed in reverse so the lowest range is worked on next: refused rows come out ascending.
    for (let i = refusedParts.length - 1; i >= 0; i--) stack.push(refusedParts[i]!);
  }
  out.refused.sort((x, y) => x.row - y.row);
  const systematic = bounded && out.inserted === 0 && out.refused.length > 0;
  return { outcome: out, systematic };
}

/** [lo, r), [r, r+1), [r+1, hi) around the row ClickHouse named (1-based within the range), else halves. */
function partsAround(lo: number, hi: number, row: number | null): Array<[number, number]> {
  const r = row === null ? -1 : lo + row - 1;
  if (r < lo || r >= hi) return halves(lo, hi);
  const parts: Array<[number, number]> = [];
  if (r > lo) parts.push([lo, r]);
  parts.push([r, r + 1]);
  if (r + 1 < hi) parts.push([r + 1, hi]);
  return parts;
}

function halves(lo: number, hi: number): Array<[number, number]> {
  const mid = lo + ((hi - lo) >> 1);
  return [
    [lo, mid],
    [mid, hi],
  ];
}
