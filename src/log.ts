/**
 * One JSON object per line on stderr: time, level, msg, then context fields.
 * Secrets never reach here: callers pass only what is safe, and `redact` masks known keys and the
 * user information of any URL anyway.
 */
import { withoutUserInfo } from "./redaction/url-mask.ts";
export type LogLevel = "debug" | "info" | "warn" | "error";
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET_KEY = /pass(word)?|secret|token|sasl\.(password|oauthbearer)|ssl\.key/i;

let threshold = RANK.info;
const stderrSink = (line: string): void => void process.stderr.write(line + "\n");
let sink = stderrSink;

export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

/** Where lines go instead of stderr (the delivery simulation keeps each run's lines); none restores stderr. */
export function setLogSink(fn?: (line: string) => void): void {
  sink = fn ?? stderrSink;
}

function redact(ctx: Record<string, unknown>): Record<string, unknown> {
  for (const k of Object.keys(ctx)) {
    const v = ctx[k];
    if (SECRET_KEY.test(k)) ctx[k] = "[redacted]";
    else if (typeof v === "string") ctx[k] = withoutUserInfo(v);
  }
  return ctx;
}

/** Causes followed at most this deep (a cycle, or a chain of wrappers, ends there). */
const MAX_CAUSES = 5;

/**
 * An error as a log field: its name, message, code, whether a retry can help, its stack, and its
 * cause the same way, so a wrapped failure keeps what caused it.
 */
export function errorFields(e: unknown, depth = 0): unknown {
  if (!(e instanceof Error)) return e === undefined ? undefined : String(e);
  const { code, retryable } = e as { code?: unknown; retryable?: unknown };
  return {
    name: e.name,
    message: withoutUserInfo(e.message),
    ...(code !== undefined ? { code } : {}),
    ...(typeof retryable === "boolean" ? { retryable } : {}),
    ...(e.stack ? { stack: withoutUserInfo(e.stack) } : {}),
    ...(e.cause !== undefined && depth < MAX_CAUSES ? { cause: errorFields(e.cause, depth + 1) } : {}),
  };
}

function emit(level: LogLevel, msg: string, ctx?: Record<string, unknown>): void {
  if (RANK[level] < threshold) return;
  if (ctx?.err instanceof Error) ctx.err = errorFields(ctx.err);
  const line = { time: new Date().toISOString(), level, msg: withoutUserInfo(msg), ...(ctx ? redact(ctx) : {}) };
  sink(JSON.stringify(line));
}

export const log = {
  debug: (msg: string, ctx?: Record<string, unknown>) => emit("debug", msg, ctx),
  info: (msg: string, ctx?: Record<string, unknown>) => emit("info", msg, ctx),
  warn: (msg: string, ctx?: Record<string, unknown>) => emit("warn", msg, ctx),
  error: (msg: string, ctx?: Record<string, unknown>) => emit("error", msg, ctx),
};

/**
 * A log line that can come once a record (a row ClickHouse refused, a record whose decoding threw)
 * is said at most `perWindow` times a window; the occurrences left out are counted and the next line
 * said carries their number (`left_out`), so a batch of 200,000 bad rows is a few lines, and none is
 * lost from the count. The counters and the DLQ hold every record; the log holds examples.
 */
export class LineLimit {
  readonly #perWindow: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  #windowStart = -Infinity;
  #said = 0;
  #leftOut = 0;

  constructor(perWindow = 10, windowMs = 60_000, now: () => number = () => performance.now()) {
    this.#perWindow = perWindow;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /**
   * One occurrence: the fields to log it with (`left_out` added when some were left out since the
   * last line said), or null when it is left out.
   */
  take(fields: Record<string, unknown>): Record<string, unknown> | null {
    const now = this.#now();
    if (now - this.#windowStart >= this.#windowMs) {
      this.#windowStart = now;
      this.#said = 0;
    }
    if (this.#said >= this.#perWindow) {
      this.#leftOut++;
      return null;
    }
    this.#said++;
    const leftOut = this.#leftOut;
    this.#leftOut = 0;
    return leftOut > 0 ? { ...fields, left_out: leftOut } : fields;
  }
}
