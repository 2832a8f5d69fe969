/**
 * The process's own failures (invalid records are values, not exceptions: see src/cdr/).
 * Every error carries a code from a closed list and whether retrying can help.
 */
export type ErrorCode =
  | "CONFIG_INVALID"
  | "LIBRARY_UNAVAILABLE"
  | "KAFKA_CONFIG"
  | "KAFKA_CLIENT"
  | "KAFKA_DELIVERY"
  | "KAFKA_COMMIT"
  | "KAFKA_TRANSACTION"
  | "KAFKA_ADMIN"
  | "KAFKA_ACCESS"
  | "TOPOLOGY"
  | "CLICKHOUSE_INSERT"
  | "CLICKHOUSE_SCHEMA"
  | "CLICKHOUSE_ACCESS"
  | "CLICKHOUSE_ANSWER"
  | "CLICKHOUSE_UNREACHABLE"
  | "KAFKA_ASSIGNMENT_LOST";

export class CdrWorkerError extends Error {
  override name = "CdrWorkerError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly retryable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A librdkafka failure; `kafkaCode` is librdkafka's numeric error and `kafkaName` its name (e.g.
 * `_MSG_TIMED_OUT`). `retryable` follows librdkafka's own verdict where it gives one
 * (rd_kafka_error_is_retriable) and the transient codes otherwise (kafka/handle.ts).
 */
export class KafkaError extends CdrWorkerError {
  override name = "KafkaError";
  constructor(
    code: ErrorCode,
    message: string,
    readonly kafkaCode?: number,
    readonly kafkaName?: string,
    retryable = false,
    options?: { cause?: unknown },
  ) {
    super(code, message, retryable, options);
  }
}

/**
 * The group gave this batch's partitions to another member (or may have: the worker was frozen
 * past its session) before the batch was stored: it is dropped, never sent, and its records are
 * replayed by their next owner. No retry here can help; the next owner's read does.
 */
export class AssignmentLostError extends CdrWorkerError {
  override name = "AssignmentLostError";
  constructor(what: string) {
    const why = "the partitions were lost to another member; their next owner replays them";
    super("KAFKA_ASSIGNMENT_LOST", `${what}: ${why}`);
  }
}

/**
 * A table the worker cannot write exactly: a RowBinary body is read by position and width, so a
 * column of another type would store other values rather than be refused. One problem per column;
 * an operator's fix (exit 2), never a retry.
 */
export class SchemaMismatchError extends CdrWorkerError {
  override name = "SchemaMismatchError";
  constructor(
    readonly table: string,
    readonly problems: string[],
  ) {
    super("CLICKHOUSE_SCHEMA", problems.map((p) => `schema error: ${table}: ${p}`).join("\n"));
  }
}

/** A configuration problem: one per variable, so all of them can be reported at once. */
export interface ConfigProblem {
  variable: string;
  value: string | undefined;
  expected: string;
}

export class ConfigError extends CdrWorkerError {
  override name = "ConfigError";
  constructor(readonly problems: ConfigProblem[]) {
    super("CONFIG_INVALID", problems.map(formatProblem).join("\n"));
  }
}

export function formatProblem(p: ConfigProblem): string {
  const shown = p.value === undefined ? "(unset)" : JSON.stringify(p.value);
  return `config error: ${p.variable}=${shown}: ${p.expected}`;
}
