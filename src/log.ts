/**
 * One JSON object per line on stderr: time, level, msg, then context fields.
 * Secrets never reach here: callers pass only what is safe, and `redact` masks known keys anyway.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET_KEY = /pass(word)?|secret|token|sasl\.(password|oauthbearer)|ssl\.key/i;

let threshold = RANK.info;
const sink = (line: string): void => void process.stderr.write(line + "\n");

export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

function redact(ctx: Record<string, unknown>): Record<string, unknown> {
  for (const k of Object.keys(ctx)) if (SECRET_KEY.test(k)) ctx[k] = "[redacted]";
  return ctx;
}

function emit(level: LogLevel, msg: string, ctx?: Record<string, unknown>): void {
  if (RANK[level] < threshold) return;
  const err = ctx?.err;
  if (err instanceof Error) ctx!.err = { name: err.name, message: err.message, code: (err as { code?: string }).code };
  sink(JSON.stringify({ time: new Date().toISOString(), level, msg, ...(ctx ? redact(ctx) : {}) }));
}

export const log = {
  debug: (msg: string, ctx?: Record<string, unknown>) => emit("debug", msg, ctx),
  info: (msg: string, ctx?: Record<string, unknown>) => emit("info", msg, ctx),
  warn: (msg: string, ctx?: Record<string, unknown>) => emit("warn", msg, ctx),
  error: (msg: string, ctx?: Record<string, unknown>) => emit("error", msg, ctx),
};
