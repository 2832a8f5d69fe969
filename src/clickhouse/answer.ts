/**
 * A ClickHouse answer read with a limit. The client reads a body whole, whatever its size; a broken
 * proxy's endless body, or a version string of megabytes that would land in metric labels, must
 * cost a bounded read and a clear error instead.
 */
import type { ClickHouseClient, ClickHouseSettings, ExecResult } from "@clickhouse/client";
import type Stream from "node:stream";
import { CdrWorkerError } from "../errors.ts";
import { refusal } from "./insert-error.ts";

/** A one-line answer: a version, a count. */
export const SMALL_ANSWER_BYTES = 64 * 1024;
/** A list the worker asks for: its running query ids, a table's columns. */
export const LIST_ANSWER_BYTES = 4 * 1024 * 1024;
/**
 * Rows the replay check or a lost insert's check reads back: a batch's, or a partition's since its
 * commit, about 70 bytes a row. A worker commits after each insert, so what any owner stored past a
 * commit is at most its batches in flight (a few times BATCH_BACKLOG_ROWS): 32 MiB holds 480,000
 * rows and leaves the rest of the memory bound to the worker.
 */
export const ROWS_ANSWER_BYTES = 32 * 1024 * 1024;

/**
 * The body of `stream` as text; past `limit` bytes the stream is dropped and the read refused.
 * `signal` ends the read too: the client's abort ends the request, not a body already streaming.
 */
export async function readCapped(
  stream: AsyncIterable<unknown>,
  limit: number,
  what: string,
  signal?: AbortSignal,
): Promise<string> {
  const destroy = (stream as { destroy?: (e?: Error) => void }).destroy?.bind(stream);
  const onAbort = () => destroy?.(new Error(`${what}: aborted`));
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await readAll(stream, limit, what);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

async function readAll(stream: AsyncIterable<unknown>, limit: number, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of stream) {
    const chunk = typeof c === "string" ? Buffer.from(c) : (c as Buffer);
    total += chunk.length;
    if (total > limit) {
      (stream as { destroy?: () => void }).destroy?.();
      const message = `${what}: the answer is over ${limit} bytes; not a ClickHouse answer`;
      throw new CdrWorkerError("CLICKHOUSE_ANSWER", message, true);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** How long a query's whole answer may take where the caller names no deadline. */
export const DEFAULT_ANSWER_MS = 30_000;
/**
 * How far past CLICKHOUSE_REQUEST_TIMEOUT_MS a request is ended whatever it is doing: the client's
 * own timeout is the socket's idle time, which an endpoint that trickles a byte now and then never
 * reaches.
 */
export const ANSWER_DEADLINE_MARGIN_MS = 1_000;

export interface AnswerOptions {
  settings?: ClickHouseSettings;
  format?: "TabSeparated" | "JSONEachRow";
  /** The whole request's deadline, answer read included (DEFAULT_ANSWER_MS unless given). */
  timeoutMs?: number;
  /** Runs the deadline's timer (a Clock's setTimeout); the process's timers unless given. */
  setTimer?: (fn: () => void, ms: number) => () => void;
}

/**
 * A query's answer (TabSeparated unless `format` says), at most `limit` bytes and within one
 * deadline. A refusal is read with the same limit (the client reads an error's body whole) and
 * thrown as the client would throw it, its code from the exception header or the text.
 */
export async function queryText(
  ch: ClickHouseClient,
  query: string,
  limit: number,
  opts: AnswerOptions = {},
): Promise<string> {
  const what = query.slice(0, 80);
  return withDeadline(opts.timeoutMs ?? DEFAULT_ANSWER_MS, what, opts.setTimer, async (signal) => {
    const r = await ch.exec({
      query: `${query} FORMAT ${opts.format ?? "TabSeparated"}`,
      abort_signal: signal,
      ignore_error_response: true,
      ...(opts.settings ? { clickhouse_settings: opts.settings } : {}),
    });
    const text = await readCapped(r.stream, limit, what, signal);
    const status = r.http_status_code ?? 200;
    if (status >= 300 || r.response_headers["x-clickhouse-exception-code"] !== undefined)
      throw refusal(status, r.response_headers, text);
    return text;
  });
}

/**
 * Runs `fn` with a signal that aborts it at `ms`, answer included; past it, throws a retryable
 * CLICKHOUSE_ANSWER error saying so (its cause the client's).
 */
export async function withDeadline<T>(
  ms: number,
  what: string,
  setTimer: AnswerOptions["setTimer"],
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  const cancel = (setTimer ?? processTimer)(() => abort.abort(), ms);
  try {
    return await fn(abort.signal);
  } catch (e) {
    if (!abort.signal.aborted) throw e;
    throw new CdrWorkerError("CLICKHOUSE_ANSWER", `${what}: no whole answer within ${ms} ms`, true, { cause: e });
  } finally {
    cancel();
  }
}

function processTimer(fn: () => void, ms: number): () => void {
  const t = setTimeout(fn, ms);
  return () => clearTimeout(t);
}

/** What `SELECT version()` answered, as a version may look: digits, dots and a short suffix. */
export function versionOf(answer: string): string {
  const v = answer.trim();
  if (!/^\d+(\.\d+){1,4}[\w.+-]{0,32}$/.test(v)) {
    const said = JSON.stringify(v.slice(0, 80));
    throw new CdrWorkerError("CLICKHOUSE_ANSWER", `SELECT version() answered ${said}: not a version`, true);
  }
  return v;
}

/**
 * An exception as each supported server writes it: `Code: 241. DB::Exception:`, or 18.16's
 * `Code: 241, e.displayText() =`.
 */
const EXCEPTION_TEXT = /\bCode: \d+[.,] (?:e\.displayText\(\) = )?DB::Exception\b/;

/**
 * Reads an insert's answer (`exec` with `ignore_error_response`) and throws its refusal, if any.
 * Judged whole: a server that sent its headers early (progress headers in a user's profile), or a
 * proxy, writes the exception into a 200 body; an insert's own answer has none.
 */
export async function readInsertAnswer(r: ExecResult<Stream.Readable>, signal?: AbortSignal): Promise<void> {
  const answer = await readCapped(r.stream, LIST_ANSWER_BYTES, "an insert's answer", signal);
  const status = r.http_status_code ?? 200;
  if (status >= 300 || r.response_headers["x-clickhouse-exception-code"] !== undefined || EXCEPTION_TEXT.test(answer))
    throw refusal(status, r.response_headers, answer);
}
