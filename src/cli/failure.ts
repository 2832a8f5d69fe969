/**
 * What a command's failure means for its exit, and the line that says why: one classification for
 * main (a command that throws) and `check` (which reports every problem it finds, not the first).
 */
import { CdrWorkerError, ConfigError, SchemaMismatchError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";

export interface Failure {
  kind: ExitKind;
  /** One line a problem; several for a ConfigError or a SchemaMismatchError. */
  line: string;
}

export function classifyFailure(e: unknown): Failure {
  if (e instanceof ConfigError) return { kind: "CONFIG", line: e.message };
  if (e instanceof SchemaMismatchError) return { kind: "SCHEMA", line: e.message };
  if (e instanceof CdrWorkerError && e.code === "CLICKHOUSE_ACCESS" && !e.retryable)
    return { kind: "ACCESS", line: e.message };
  if (e instanceof CdrWorkerError && e.code === "CONFIG_INVALID")
    return { kind: "CONFIG", line: `config error: ${e.message}` };
  const code = e instanceof CdrWorkerError ? e.code : "UNEXPECTED";
  const message = e instanceof Error ? e.message : String(e);
  const retry = e instanceof CdrWorkerError && e.retryable ? " (a retry may help)" : "";
  return { kind: "FAILED", line: `error ${code}: ${message.replace(/\s*\n\s*/g, " ")}${retry}` };
}
