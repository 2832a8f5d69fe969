/**
 * The one reader of the environment. Every variable is declared once here with its default, its
 * valibot schema and its help line; `loadConfig` reports every bad value at once (one line each).
 */
import { readFileSync } from "node:fs";
import * as v from "valibot";
import { hostname } from "node:os";
import { getCountries, type CountryCode } from "libphonenumber-js/max";
import { ConfigError, type ConfigProblem } from "./errors.ts";
import { MIN_KEY_CHARS, MIN_PREVIOUS_KEY_CHARS } from "./dlq/provenance-mac.ts";
import { HEAP_BYTES_PER_ROW } from "./stats/memory-bound.ts";
import { ANSWER_DEADLINE_MARGIN_MS } from "./clickhouse/answer.ts";
import type { ClickHouseOptions } from "./clickhouse/client.ts";
import { PLAIN_IDENTIFIER } from "./clickhouse/migrate.ts";
import { retryBudgetMs, type RetryPolicy } from "./clickhouse/retry.ts";
import { readSecretFile } from "./secrets/secret-file.ts";
import { withoutUserInfo } from "./redaction/url-mask.ts";

/** A date (UTC midnight) or a time with its zone, as DLQ_PROVENANCE_OLDER_FORMS_UNTIL takes it. */
const ISO_DATE_OR_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?(\.\d+)?(Z|[+-]\d{2}:\d{2}))?$/;

type Env = Record<string, string | undefined>;

const int = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `a whole number from ${min} to ${max}`),
    v.transform(Number),
    v.minValue(min, `a whole number from ${min} to ${max}`),
    v.maxValue(max, `a whole number from ${min} to ${max}`),
  );
const num = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+(\.\d+)?$/, `a number from ${min} to ${max}`),
    v.transform(Number),
    v.minValue(min, `a number from ${min} to ${max}`),
    v.maxValue(max, `a number from ${min} to ${max}`),
  );
const text = v.pipe(v.string(), v.minLength(1, "a non-empty string"));
/**
 * Names that go into SQL as text (18.16 has no identifier parameters): plain identifiers only,
 * checked here once, for every command that uses them (migrate's --cluster too).
 */
export { PLAIN_IDENTIFIER };
const identifier = v.pipe(
  v.string(),
  v.regex(PLAIN_IDENTIFIER, "a plain identifier: letters, digits and _, not starting with a digit"),
);
const oneOf = <T extends string>(values: readonly T[]) => v.picklist(values, `one of ${values.join(", ")}`);
const URL_LIST = /^https?:\/\/[^\s,]+(\s*,\s*https?:\/\/[^\s,]+)*$/;
const urls = v.pipe(
  v.string(),
  v.regex(URL_LIST, "an http(s) URL, or several comma-separated"),
  v.check((s) => s.split(",").every((u) => URL.canParse(u.trim())), "an http(s) URL, or several comma-separated"),
);
const COUNTRIES = getCountries();

interface VarSpec {
  schema: v.GenericSchema<string, unknown>;
  default?: string;
  help: string;
  secret?: boolean;
}

/** Every variable the worker reads (KAFKA_PROP_* aside), in --help order. */
export const VARIABLES = {
  KAFKA_BROKERS: { schema: text, default: "127.0.0.1:9092", help: "Kafka bootstrap servers, comma-separated" },
  KAFKA_GROUP_ID: { schema: text, default: "cdr-worker", help: "consumer group" },
  KAFKA_TOPIC_RAW: { schema: text, default: "cdr.raw", help: "topic of raw vendor CDRs" },
  KAFKA_TOPIC_DLQ: { schema: text, default: "cdr.raw.dlq", help: "dead-letter topic" },
  CLICKHOUSE_URL: {
    schema: urls,
    default: "http://127.0.0.1:8123",
    help: "ClickHouse HTTP endpoint(s), comma-separated: an insert that fails as transient goes to the next",
  },
  CLICKHOUSE_USER: { schema: text, default: "default", help: "ClickHouse user" },
  CLICKHOUSE_PASSWORD: {
    schema: v.string(),
    default: "",
    help:
      "ClickHouse password (never logged; or CLICKHOUSE_PASSWORD_FILE: a file holding it, read again after the " +
      "server refuses the password and every 10 s, so a rotation needs no restart)",
    secret: true,
  },
  CLICKHOUSE_CA_CERT: {
    schema: v.string(),
    default: "",
    help: "PEM file of the CA(s) to trust for an https:// CLICKHOUSE_URL (empty: the system's)",
  },
  CLICKHOUSE_DATABASE: { schema: identifier, default: "telecom", help: "database of the normalized table" },
  CLICKHOUSE_TABLE: { schema: identifier, default: "cdr", help: "normalized table" },
  CLICKHOUSE_REQUEST_TIMEOUT_MS: { schema: int(100, 600_000), default: "10000", help: "timeout of one insert attempt" },
  CLICKHOUSE_KEEP_ALIVE_IDLE_MS: {
    schema: int(0, 600_000),
    default: "2000",
    help:
      "reuse an idle connection for this long (below the server's keep_alive_timeout, 3 s on 18.16); " +
      "0: a connection per request",
  },
  BATCH_SIZE: {
    schema: int(1, 100_000),
    default: "1000",
    help: "rows per ClickHouse insert; a full batch flushes at once",
  },
  BATCH_MAX_BYTES: {
    schema: int(1 << 20, 1 << 30),
    default: String(16 << 20),
    help:
      "a batch also flushes once its insert body and original payloads reach this many bytes, so memory " +
      "is bounded by bytes whatever the record size (docs/internals.md \"Memory, in bytes\")",
  },
  BATCH_BACKLOG_ROWS: {
    schema: int(0, 1_000_000),
    default: "0",
    help:
      "rows a batch may grow to while every insert is in flight (a backlog), so that a busy ClickHouse gets " +
      "fewer, larger inserts; 0: 10 × BATCH_SIZE, at most what keeps the memory bound (2 × BATCH_MAX_BYTES ÷ " +
      `${HEAP_BYTES_PER_ROW / 1024} KiB rows: 8192 at the defaults), never below BATCH_SIZE; BATCH_SIZE turns it off`,
  },
  BATCH_FLUSH_INTERVAL_SECONDS: {
    schema: num(0.01, 3600),
    default: "2",
    help: "flush a non-empty batch this long after the last flush",
  },
  FLUSH_CONCURRENCY: {
    schema: int(1, 16),
    default: "2",
    help: "inserts in flight at once; memory is bounded by (this + 1) × BATCH_BACKLOG_ROWS rows",
  },
  CH_RETRY_MAX_ATTEMPTS: { schema: int(1, 100), default: "3", help: "insert attempts before a batch goes to the DLQ" },
  CH_RETRY_INITIAL_DELAY_MS: { schema: int(0, 600_000), default: "500", help: "delay before the second attempt" },
  CH_RETRY_BACKOFF_FACTOR: {
    schema: num(1, 100),
    default: "2",
    help: "each further delay is the previous one times this",
  },
  CH_UNREACHABLE_POLICY: {
    schema: oneOf(["dlq", "wait"] as const),
    default: "dlq",
    help:
      "when no ClickHouse endpoint answers at all: dlq = retries, then the DLQ (the spec); wait = pause " +
      "consumption and retry until one answers, spending no attempts",
  },
  DELIVERY: {
    schema: oneOf(["exactly-once", "at-least-once"] as const),
    default: "exactly-once",
    help:
      "exactly-once = a partition's next owner skips what its last owner already stored or dead-lettered " +
      "(read from the provenance columns and the DLQ); at-least-once = replays are stored again and collapse " +
      "by ReplacingMergeTree",
  },
  DLQ_STORAGE_FAILURE_REASON: {
    schema: oneOf(["normalization_error", "ch_insert_failed"] as const),
    default: "normalization_error",
    help: "failure_reason of records whose inserts exhausted their retries",
  },
  DLQ_MAX_RATIO: {
    schema: num(0, 1),
    default: "1",
    help:
      "circuit breaker: pause consuming when the DLQ share of the last DLQ_RATIO_WINDOW records (decoder " +
      "rejections and ClickHouse's refusals alike) exceeds this, until reset or restart (1 = off)",
  },
  DLQ_PROVENANCE: {
    schema: oneOf(["signed", "unsigned"] as const),
    default: "signed",
    help:
      "signed: under exactly-once `run` needs DLQ_PROVENANCE_KEY; unsigned: no key, and the replay check and " +
      "the audit take any DLQ envelope's source headers as true (docs/security.md)",
  },
  DLQ_PROVENANCE_KEY: {
    schema: v.union([
      v.literal(""),
      v.pipe(v.string(), v.minLength(MIN_KEY_CHARS, `at least ${MIN_KEY_CHARS} characters`)),
    ]),
    default: "",
    secret: true,
    help:
      "a secret every worker of the group shares (or DLQ_PROVENANCE_KEY_FILE): each DLQ envelope carries its MAC, " +
      "and the replay check and the audit take only envelopes with a valid one; empty: envelopes are trusted " +
      "as they are (docs/security.md)",
  },
  DLQ_PROVENANCE_KEYS_PREVIOUS: {
    schema: v.pipe(
      v.string(),
      v.check(
        (s) => previousKeys(s).every((k) => k.length >= MIN_PREVIOUS_KEY_CHARS),
        `keys separated by commas or newlines, each at least ${MIN_PREVIOUS_KEY_CHARS} characters`,
      ),
    ),
    default: "",
    secret: true,
    help:
      "earlier DLQ_PROVENANCE_KEYs, comma-separated (or DLQ_PROVENANCE_KEYS_PREVIOUS_FILE, one a line): they " +
      "verify envelopes signed before a rotation, never sign (docs/security.md)",
  },
  DLQ_PROVENANCE_OLDER_FORMS_UNTIL: {
    schema: v.union([
      v.literal(""),
      v.pipe(
        v.string(),
        v.check(
          (s) => ISO_DATE_OR_TIME.test(s) && !Number.isNaN(Date.parse(s)),
          "an ISO 8601 date (2027-01-15) or UTC time (2027-01-15T00:00:00Z)",
        ),
      ),
    ]),
    default: "",
    help:
      "from this date (UTC) on, DLQ envelopes whose MAC proves their source only (the forms before the " +
      "whole-envelope MAC) no longer verify: set it to the upgrade's day plus the DLQ topic's retention; empty: " +
      "they verify for as long as the DLQ keeps them (docs/security.md)",
  },
  DLQ_RATIO_WINDOW: { schema: int(10, 10_000_000), default: "1000", help: "records in the breaker's sliding window" },
  DEFAULT_PHONE_REGION: {
    schema: v.union([v.literal(""), oneOf(COUNTRIES)], "an ISO 3166-1 alpha-2 region such as DE, or empty"),
    default: "",
    help: "region for caller numbers without international prefix (empty: such numbers are invalid)",
  },
  RECORD_MAX_BYTES: {
    schema: int(1024, 16 * 1024 * 1024),
    default: "1048576",
    help:
      "largest raw record taken, whatever its codec (the raw topic's default 1 MiB): a larger one goes to " +
      "the DLQ as normalization_error, its first bytes as the payload, marked truncated",
  },
  PHONE_CACHE_SIZE: {
    schema: int(0, 10_000_000),
    default: "50000",
    help: "phone verdicts cached (~0.5 KiB of RSS each)",
  },
  STATS_HOST: {
    schema: text,
    default: "127.0.0.1",
    help:
      "address of the stats/metrics/health server: loopback by default, as it has no authentication " +
      "(the image sets 0.0.0.0 for its published port)",
  },
  STATS_PORT: { schema: int(0, 65_535), default: "8081", help: "port of the stats server (0: any free port)" },
  WORKER_INSTANCE: {
    schema: v.string(),
    default: "",
    help: "worker identity in DLQ envelopes (default: host name and pid)",
  },
  LAG_TIME_INTERVAL_SECONDS: {
    schema: int(0, 3600),
    default: "30",
    help:
      "read how long each owned partition's oldest uncommitted record has waited every this many seconds, " +
      "for stats, metrics and the alert against the raw topic's retention (0: never)",
  },
  AUDIT_INTERVAL_SECONDS: {
    schema: int(0, 604_800),
    default: "0",
    help:
      "run `cdr-worker audit` over the records of the last two intervals every this many seconds and export " +
      "the result as metrics (0: never); of a group's workers, the owner of the raw topic's partition 0 runs it",
  },
  SHUTDOWN_TIMEOUT_SECONDS: {
    schema: v.union([v.literal(""), num(1, 3600)], "a number from 1 to 3600, or empty"),
    default: "",
    help:
      "on SIGTERM, give up (exit nonzero, nothing committed past durable) after this long (default: one " +
      "insert's retry budget at CH_RETRY_* and CLICKHOUSE_REQUEST_TIMEOUT_MS, plus 10 s; 45 s at their defaults)",
  },
  CORE_DUMPS: {
    schema: oneOf(["off", "on"] as const),
    default: "off",
    help:
      "on: leave the core file size limit as the process got it; off: no core files (a core holds " +
      "credentials and CDRs)",
  },
  LOG_LEVEL: { schema: oneOf(["debug", "info", "warn", "error"] as const), default: "info", help: "log threshold" },
  LIBRDKAFKA_PATH: {
    schema: v.string(),
    default: "",
    help: "librdkafka shared library to load instead of the embedded/Debian one",
  },
} satisfies Record<string, VarSpec>;

type Vars = typeof VARIABLES;
type Parsed = { [K in keyof Vars]: v.InferOutput<Vars[K]["schema"]> };

export interface Config {
  kafka: {
    brokers: string;
    groupId: string;
    topicRaw: string;
    topicDlq: string;
    props: Record<string, string>;
    /** librdkafka properties read from a file (KAFKA_PROP_<NAME>_FILE), by property: the file's path. */
    propFiles: Record<string, string>;
  };
  clickhouse: ClickHouseOptions;
  /** backlogRows: what a batch may grow to while every insert slot is taken (≥ size). */
  batch: { size: number; backlogRows: number; maxBytes: number; flushIntervalMs: number; concurrency: number };
  retry: { maxAttempts: number; initialDelayMs: number; backoffFactor: number; whenUnreachable: "dlq" | "wait" };
  dlq: {
    storageFailureReason: "normalization_error" | "ch_insert_failed";
    maxRatio: number;
    ratioWindow: number;
    /** DLQ_PROVENANCE_KEY; "" when unset. */
    provenanceKey: string;
    /** DLQ_PROVENANCE_KEYS_PREVIOUS: keys that verify, never sign. */
    previousKeys: string[];
    /** DLQ_PROVENANCE: `signed` needs a key under exactly-once (`run` checks: keyRequired). */
    provenance: "signed" | "unsigned";
    /** DLQ_PROVENANCE_OLDER_FORMS_UNTIL (ms since the epoch): older MAC forms verify before it only. */
    olderFormsUntil: number | undefined;
  };
  delivery: "exactly-once" | "at-least-once";
  phone: { defaultRegion: CountryCode | undefined; cacheSize: number };
  /** RECORD_MAX_BYTES: a larger raw record is dead-lettered, never parsed or stored. */
  recordMaxBytes: number;
  stats: { host: string; port: number };
  workerInstance: string;
  shutdownTimeoutMs: number;
  auditIntervalMs: number;
  /** LAG_TIME_INTERVAL_SECONDS, in ms; 0: lag in time is not read. */
  lagTimeIntervalMs: number;
  logLevel: "debug" | "info" | "warn" | "error";
  /** Keep the core file size limit the process got (CORE_DUMPS=on); off by default. */
  coreDumps: boolean;
  librdkafkaPath: string;
}

/**
 * librdkafka properties an operator may not set through KAFKA_PROP_*: the delivery contract or the
 * binding depends on their values (docs/configuration.md lists them).
 */
export const RESERVED_KAFKA_PROPS: Readonly<Record<string, string>> = {
  "enable.auto.commit": "the worker commits only offsets ClickHouse or the DLQ acknowledged",
  "enable.auto.offset.store": "the worker stores only offsets ClickHouse or the DLQ acknowledged",
  "log.queue": "librdkafka's logs must reach the worker on its own thread; callbacks on librdkafka's threads crash",
  "statistics.interval.ms":
    "under exactly-once the worker reads its heartbeats' answers from its consumer's statistics (every 0.23 s)",
  "group.id": "set KAFKA_GROUP_ID",
  "bootstrap.servers": "set KAFKA_BROKERS",
  "metadata.broker.list": "set KAFKA_BROKERS",
  "isolation.level":
    "every reader of the DLQ is read_committed: an aborted transaction's envelopes were never delivered",
};

/**
 * Properties exactly-once keeps at the worker's own values: an envelope the DLQ producer loses or
 * writes twice is a record dead-lettered never or twice. With DELIVERY=at-least-once they may be set.
 */
export const EXACTLY_ONCE_KAFKA_PROPS: Readonly<Record<string, string>> = {
  "enable.idempotence":
    "exactly-once needs the DLQ producer idempotent (the worker sets true): no envelope written twice by a retry",
  acks: "exactly-once needs every in-sync replica to acknowledge an envelope (acks=all, which idempotence implies)",
  "transactional.id": "exactly-once names the DLQ producer's transactions <KAFKA_GROUP_ID>-<WORKER_INSTANCE>",
};

export { withoutUserInfo };

/** security.protocol → KAFKA_PROP_SECURITY_PROTOCOL: the variable that sets a property. */
export function kafkaPropVariable(prop: string): string {
  const spelled = prop.replace(/[._-]/g, (c) => (c === "." ? "_" : c === "_" ? "__" : "___"));
  return `KAFKA_PROP_${spelled.toUpperCase()}`;
}

/** KAFKA_PROP_SECURITY_PROTOCOL → security.protocol (Confluent's convention: _ . / __ _ / ___ -). */
export function kafkaPropName(suffix: string): string {
  return suffix
    .replace(/___/g, "\u0001")
    .replace(/__/g, "\u0002")
    .replace(/_/g, ".")
    .replace(/\u0001/g, "-")
    .replace(/\u0002/g, "_")
    .toLowerCase();
}

/**
 * BATCH_BACKLOG_ROWS as the batcher uses it. Its default grows a batch tenfold under a backlog, but
 * no further than the memory bound already allows for a batch of BATCH_MAX_BYTES
 * (stats/memory-bound.ts: a slot holds max(2 × bytes, 4 KiB a row)), so the default does not raise it.
 */
export function backlogRows(size: number, setting: number, maxBytes: number): number {
  if (setting > 0) return Math.max(size, setting);
  return Math.max(size, Math.min(10 * size, Math.floor((2 * maxBytes) / HEAP_BYTES_PER_ROW)));
}

export { readSecretFile };

/** Variables whose value may come from a file instead (`<NAME>_FILE`), as container platforms mount secrets. */
export const FILE_FORMS = ["CLICKHOUSE_PASSWORD", "DLQ_PROVENANCE_KEY", "DLQ_PROVENANCE_KEYS_PREVIOUS"] as const;

/**
 * The environment with every `<NAME>_FILE` of CLICKHOUSE_PASSWORD and of any KAFKA_PROP_* replaced
 * by `<NAME>` = the file's content (one trailing newline dropped). Setting both forms of one
 * variable, or naming a file that cannot be read, is a problem; the content is never reported.
 */
function withFileForms(env: Env, problems: ConfigProblem[]): Env {
  const out: Env = { ...env };
  for (const [name, path] of Object.entries(env)) {
    if (!name.endsWith("_FILE") || path === undefined) continue;
    const base = name.slice(0, -"_FILE".length);
    if (
      !(FILE_FORMS as readonly string[]).includes(base) &&
      !(base.startsWith("KAFKA_PROP_") && base.length > "KAFKA_PROP_".length)
    )
      continue;
    delete out[name];
    if (env[base] !== undefined) {
      problems.push({ variable: name, value: path, expected: `expected only one of ${base} and ${name}` });
      continue;
    }
    try {
      out[base] = readSecretFile(path);
    } catch (e) {
      problems.push({
        variable: name,
        value: path,
        expected: `expected a readable file (${(e as NodeJS.ErrnoException).code ?? "unreadable"})`,
      });
    }
  }
  return out;
}

export function loadConfig(rawEnv: Env = process.env): Config {
  const problems: ConfigProblem[] = [];
  const env = withFileForms(rawEnv, problems);
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(VARIABLES) as Array<[string, VarSpec]>) {
    const raw = env[name];
    const value = raw === undefined || (raw === "" && spec.default !== "") ? spec.default! : raw;
    const r = v.safeParse(spec.schema, value);
    if (r.success) out[name] = r.output;
    else
      problems.push({
        variable: name,
        value: spec.secret ? "[redacted]" : withoutUserInfo(raw),
        expected: `expected ${r.issues[0].message}`,
      });
  }
  let caCert: Buffer | undefined;
  const caPath = out.CLICKHOUSE_CA_CERT as string | undefined;
  if (caPath) {
    try {
      caCert = readFileSync(caPath);
    } catch (e) {
      problems.push({
        variable: "CLICKHOUSE_CA_CERT",
        value: caPath,
        expected: `expected a readable PEM file (${(e as NodeJS.ErrnoException).code ?? "unreadable"})`,
      });
    }
  }
  const props: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith("KAFKA_PROP_") || value === undefined) continue;
    const prop = kafkaPropName(name.slice("KAFKA_PROP_".length));
    if (!prop)
      problems.push({ variable: name, value: "[redacted]", expected: "expected a property name after KAFKA_PROP_" });
    else if (RESERVED_KAFKA_PROPS[prop])
      problems.push({ variable: name, value, expected: `${prop} cannot be set here: ${RESERVED_KAFKA_PROPS[prop]}` });
    else if (EXACTLY_ONCE_KAFKA_PROPS[prop] && (out as Partial<Parsed>).DELIVERY === "exactly-once")
      problems.push({
        variable: name,
        value,
        expected: `${prop} cannot be set with DELIVERY=exactly-once: ${EXACTLY_ONCE_KAFKA_PROPS[prop]}`,
      });
    else props[prop] = value;
  }
  if ((out as Partial<Parsed>).DLQ_PROVENANCE === "unsigned" && (out as Partial<Parsed>).DLQ_PROVENANCE_KEY)
    problems.push({
      variable: "DLQ_PROVENANCE",
      value: "unsigned",
      expected: "expected signed (or no DLQ_PROVENANCE_KEY): unsigned means no key, and a key is set",
    });
  if (problems.length) throw new ConfigError(problems);
  const p = out as Parsed;
  const retry: Config["retry"] = {
    maxAttempts: p.CH_RETRY_MAX_ATTEMPTS,
    initialDelayMs: p.CH_RETRY_INITIAL_DELAY_MS,
    backoffFactor: p.CH_RETRY_BACKOFF_FACTOR,
    whenUnreachable: p.CH_UNREACHABLE_POLICY,
  };
  return {
    kafka: {
      brokers: p.KAFKA_BROKERS,
      groupId: p.KAFKA_GROUP_ID,
      topicRaw: p.KAFKA_TOPIC_RAW,
      topicDlq: p.KAFKA_TOPIC_DLQ,
      props,
      propFiles: Object.fromEntries(
        Object.entries(rawEnv)
          .filter(([k, v]) => k.startsWith("KAFKA_PROP_") && k.endsWith("_FILE") && v !== undefined)
          .map(([k, v]) => [kafkaPropName(k.slice("KAFKA_PROP_".length, -"_FILE".length)), v!]),
      ),
    },
    clickhouse: {
      url: p.CLICKHOUSE_URL,
      user: p.CLICKHOUSE_USER,
      password: p.CLICKHOUSE_PASSWORD,
      ...(rawEnv.CLICKHOUSE_PASSWORD_FILE ? { passwordFile: rawEnv.CLICKHOUSE_PASSWORD_FILE } : {}),
      database: p.CLICKHOUSE_DATABASE,
      table: p.CLICKHOUSE_TABLE,
      requestTimeoutMs: p.CLICKHOUSE_REQUEST_TIMEOUT_MS,
      keepAliveIdleMs: p.CLICKHOUSE_KEEP_ALIVE_IDLE_MS,
      caCert,
    },
    batch: {
      size: p.BATCH_SIZE,
      backlogRows: backlogRows(p.BATCH_SIZE, p.BATCH_BACKLOG_ROWS, p.BATCH_MAX_BYTES),
      maxBytes: p.BATCH_MAX_BYTES,
      flushIntervalMs: Math.round(p.BATCH_FLUSH_INTERVAL_SECONDS * 1000),
      concurrency: p.FLUSH_CONCURRENCY,
    },
    retry,
    dlq: {
      storageFailureReason: p.DLQ_STORAGE_FAILURE_REASON,
      maxRatio: p.DLQ_MAX_RATIO,
      ratioWindow: p.DLQ_RATIO_WINDOW,
      provenanceKey: p.DLQ_PROVENANCE_KEY,
      previousKeys: previousKeys(p.DLQ_PROVENANCE_KEYS_PREVIOUS),
      provenance: p.DLQ_PROVENANCE,
      olderFormsUntil: p.DLQ_PROVENANCE_OLDER_FORMS_UNTIL ? Date.parse(p.DLQ_PROVENANCE_OLDER_FORMS_UNTIL) : undefined,
    },
    delivery: p.DELIVERY,
    phone: {
      defaultRegion: (p.DEFAULT_PHONE_REGION || undefined) as CountryCode | undefined,
      cacheSize: p.PHONE_CACHE_SIZE,
    },
    recordMaxBytes: p.RECORD_MAX_BYTES,
    stats: { host: p.STATS_HOST, port: p.STATS_PORT },
    workerInstance: p.WORKER_INSTANCE || `${hostname()}-${process.pid}`,
    shutdownTimeoutMs:
      p.SHUTDOWN_TIMEOUT_SECONDS === ""
        ? shutdownCovering(retry, p.CLICKHOUSE_REQUEST_TIMEOUT_MS)
        : Math.round(p.SHUTDOWN_TIMEOUT_SECONDS * 1000),
    auditIntervalMs: p.AUDIT_INTERVAL_SECONDS * 1000,
    lagTimeIntervalMs: p.LAG_TIME_INTERVAL_SECONDS * 1000,
    logLevel: p.LOG_LEVEL,
    coreDumps: p.CORE_DUMPS === "on",
    librdkafkaPath: p.LIBRDKAFKA_PATH,
  };
}

/** librdkafka properties for a client of this worker: brokers, then KAFKA_PROP_* overrides. */
/**
 * `run`'s refusal under exactly-once without a key, unless DLQ_PROVENANCE=unsigned says so: whoever
 * may write to the DLQ topic could otherwise make the audit count a record as dead-lettered. Other
 * commands need no key to do their work.
 */
/** Beyond one insert's retry budget, what a stop still does: the commit, the DLQ's transaction. */
const SHUTDOWN_MARGIN_MS = 10_000;

/** The shortest stop deadline that lets an insert under way end by its own retry budget, in whole seconds. */
export function shutdownCovering(retry: RetryPolicy, requestTimeoutMs: number): number {
  const ms = retryBudgetMs(retry, requestTimeoutMs + ANSWER_DEADLINE_MARGIN_MS) + SHUTDOWN_MARGIN_MS;
  return Math.ceil(ms / 1000) * 1000;
}

/**
 * A SHUTDOWN_TIMEOUT_SECONDS set below one insert's retry budget: a stop may then give up on an
 * insert that its retries would have stored, and leave its records to the next owner. `check`
 * refuses it; `run` warns.
 */
export function shutdownBelowBudget(cfg: Config): ConfigProblem | null {
  const covering = shutdownCovering(cfg.retry, cfg.clickhouse.requestTimeoutMs);
  if (cfg.shutdownTimeoutMs >= covering) return null;
  return {
    variable: "SHUTDOWN_TIMEOUT_SECONDS",
    value: String(cfg.shutdownTimeoutMs / 1000),
    expected:
      `expected at least ${covering / 1000}: one insert's retry budget (CH_RETRY_*, CLICKHOUSE_REQUEST_TIMEOUT_MS) ` +
      "plus 10 s, so that a stop can end the insert under way (or unset it: that is its default)",
  };
}

export function keyRequired(cfg: Config): ConfigProblem | null {
  if (cfg.delivery !== "exactly-once" || cfg.dlq.provenance === "unsigned" || cfg.dlq.provenanceKey) return null;
  return {
    variable: "DLQ_PROVENANCE_KEY",
    value: undefined,
    expected:
      "expected a key under exactly-once: `openssl rand -hex 32 >dlq-key`, then DLQ_PROVENANCE_KEY_FILE=dlq-key for " +
      "every worker, audit and dlq replay; or DLQ_PROVENANCE=unsigned to trust any DLQ envelope's headers",
  };
}

/** DLQ_PROVENANCE_KEYS_PREVIOUS's keys: separated by commas or newlines (a file holds one a line). */
function previousKeys(value: string): string[] {
  return value
    .split(/[,\n]/)
    .map((k) => k.trim())
    .filter(Boolean);
}

export function kafkaProps(cfg: Config, extra: Record<string, string> = {}): Record<string, string> {
  return { "bootstrap.servers": cfg.kafka.brokers, ...extra, ...cfg.kafka.props };
}

export function configHelp(): string {
  const lines = Object.entries(VARIABLES as Record<string, VarSpec>).map(
    ([k, s]) => `  ${k.padEnd(30)} ${s.help}${s.default ? ` (default ${s.default})` : ""}`,
  );
  lines.push(
    `  ${"KAFKA_PROP_<NAME>".padEnd(30)} any librdkafka property: _ → ., __ → _, ___ → -, lower-cased ` +
      "(KAFKA_PROP_SECURITY_PROTOCOL → security.protocol)",
  );
  lines.push(
    `  ${"<NAME>_FILE".padEnd(30)} CLICKHOUSE_PASSWORD_FILE, DLQ_PROVENANCE_KEY_FILE, ` +
      "DLQ_PROVENANCE_KEYS_PREVIOUS_FILE, KAFKA_PROP_<NAME>_FILE: " +
      "read the value from a file (mounted secrets); not with <NAME> too",
  );
  return lines.join("\n");
}
