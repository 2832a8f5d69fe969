import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { kafkaPropName, kafkaPropVariable, loadConfig, shutdownBelowBudget, VARIABLES } from "../src/config.ts";
import { provenanceKeyOf } from "../src/cli/provenance-key.ts";
import { payloadDigest } from "../src/dlq/provenance-mac.ts";
import { ConfigError } from "../src/errors.ts";
import { ROOT } from "./support/services.ts";

setDefaultTimeout(60_000);

test("defaults follow DECISIONS.md, but for the stats server's address: loopback, as it has no authentication", () => {
  const c = loadConfig({});
  expect(c.kafka).toEqual({ brokers: "127.0.0.1:9092", groupId: "cdr-worker", topicRaw: "cdr.raw", topicDlq: "cdr.raw.dlq", props: {}, propFiles: {} });
  expect(c.clickhouse.url).toBe("http://127.0.0.1:8123");
  expect([c.clickhouse.database, c.clickhouse.table]).toEqual(["telecom", "cdr"]);
  // Under a backlog a batch grows to 8192 rows: 10 × BATCH_SIZE, held to what the memory bound allows.
  expect(c.batch).toEqual({ size: 1000, backlogRows: 8192, maxBytes: 16 * 2 ** 20, flushIntervalMs: 2000, concurrency: 2 });
  expect(c.retry).toEqual({ maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2, whenUnreachable: "dlq" });
  expect(c.stats).toEqual({ host: "127.0.0.1", port: 8081 });
  expect(c.dlq.storageFailureReason).toBe("normalization_error");
  expect(c.workerInstance).toMatch(/-\d+$/);
});

test("KAFKA_PROP_* follow Confluent's naming convention", () => {
  expect(kafkaPropName("SECURITY_PROTOCOL")).toBe("security.protocol");
  expect(kafkaPropName("LOG__LEVEL")).toBe("log_level");
  expect(kafkaPropName("SASL_KERBEROS_SERVICE___NAME")).toBe("sasl.kerberos.service-name");
  expect(loadConfig({ KAFKA_PROP_SECURITY_PROTOCOL: "SASL_SSL" }).kafka.props).toEqual({ "security.protocol": "SASL_SSL" });
});

test("every bad value is reported, one line per problem naming variable, value and what is allowed", () => {
  let err: unknown;
  try {
    loadConfig({ BATCH_SIZE: "0", CH_RETRY_BACKOFF_FACTOR: "fast", DLQ_STORAGE_FAILURE_REASON: "oops", CLICKHOUSE_URL: "ftp://x" });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  const lines = (err as ConfigError).message.split("\n");
  expect(lines).toEqual([
    'config error: CLICKHOUSE_URL="ftp://x": expected an http(s) URL, or several comma-separated',
    'config error: BATCH_SIZE="0": expected a whole number from 1 to 100000',
    'config error: CH_RETRY_BACKOFF_FACTOR="fast": expected a number from 1 to 100',
    'config error: DLQ_STORAGE_FAILURE_REASON="oops": expected one of normalization_error, ch_insert_failed',
  ]);
});

test("a bad configuration exits 2 before any connection, and never prints the password", async () => {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], {
    env: { PATH: process.env.PATH!, BATCH_SIZE: "many", STATS_PORT: "-1", CLICKHOUSE_PASSWORD: "s3cret-pw", KAFKA_BROKERS: "127.0.0.1:1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  expect(code).toBe(2);
  expect(err.trim().split("\n")).toEqual([
    'config error: BATCH_SIZE="many": expected a whole number from 1 to 100000',
    'config error: STATS_PORT="-1": expected a whole number from 0 to 65535',
  ]);
  expect(err).not.toContain("s3cret-pw");
});

test("--help lists every variable with its default", async () => {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run", "--help"], { stdout: "pipe" });
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  for (const v of ["KAFKA_BROKERS", "BATCH_SIZE", "CH_RETRY_BACKOFF_FACTOR", "STATS_PORT", "KAFKA_PROP_<NAME>"]) expect(out).toContain(v);
  expect(out).toContain("(default 1000)");
});

describe("secrets from files (CLICKHOUSE_PASSWORD_FILE, KAFKA_PROP_<NAME>_FILE)", () => {
  const dir = mkdtempSync(`${tmpdir()}/cdr-secrets-`);
  const file = (name: string, content: string) => {
    writeFileSync(`${dir}/${name}`, content);
    return `${dir}/${name}`;
  };

  test("a _FILE form is read as the value, one trailing newline dropped", () => {
    const cfg = loadConfig({ CLICKHOUSE_PASSWORD_FILE: file("ch", "s3cret-ch\n"), KAFKA_PROP_SASL_PASSWORD_FILE: file("k", "s3cret-kafka\r\n"), KAFKA_PROP_SASL_USERNAME: "cdr" });
    expect(cfg.clickhouse.password).toBe("s3cret-ch");
    expect(cfg.kafka.props["sasl.password"]).toBe("s3cret-kafka");
    expect(cfg.kafka.props["sasl.username"]).toBe("cdr");
    expect(Object.keys(cfg.kafka.props).some((k) => k.endsWith(".file"))).toBe(false);
    // The files are kept by property and by variable: the secrets follow them while the worker runs.
    expect(cfg.kafka.propFiles).toEqual({ "sasl.password": `${dir}/k` });
    expect(cfg.clickhouse.passwordFile).toBe(`${dir}/ch`);
  });

  test("both forms of one variable, or an unreadable file, are configuration errors that never show the secret", () => {
    let err: unknown;
    try {
      loadConfig({ CLICKHOUSE_PASSWORD: "inline-secret", CLICKHOUSE_PASSWORD_FILE: file("ch2", "file-secret"), KAFKA_PROP_SASL_PASSWORD_FILE: `${dir}/missing` });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as ConfigError).message;
    expect(text).toContain("CLICKHOUSE_PASSWORD_FILE=");
    expect(text).toContain("expected only one of CLICKHOUSE_PASSWORD and CLICKHOUSE_PASSWORD_FILE");
    expect(text).toContain("KAFKA_PROP_SASL_PASSWORD_FILE=");
    expect(text).toContain("expected a readable file (ENOENT)");
    expect(text).not.toContain("inline-secret");
    expect(text).not.toContain("file-secret");
  });

  test("the worker exits 2 on both forms, and --help names the _FILE forms without any value", async () => {
    const both = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "run"], { env: { PATH: process.env.PATH!, CLICKHOUSE_PASSWORD: "x", CLICKHOUSE_PASSWORD_FILE: file("ch3", "file-secret-2") }, stderr: "pipe" });
    expect(both.exitCode).toBe(2);
    expect(both.stderr.toString()).not.toContain("file-secret-2");
    const help = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "run", "--help"], { env: { PATH: process.env.PATH!, CLICKHOUSE_PASSWORD_FILE: file("ch4", "file-secret-3") }, stdout: "pipe" });
    expect(help.stdout.toString()).toContain("CLICKHOUSE_PASSWORD_FILE");
    expect(help.stdout.toString()).not.toContain("file-secret-3");
  });
});

test.each(["ENABLE_AUTO_COMMIT", "ENABLE_AUTO_OFFSET_STORE", "LOG_QUEUE", "GROUP_ID", "BOOTSTRAP_SERVERS", "METADATA_BROKER_LIST"])(
  "KAFKA_PROP_%s is refused: the delivery contract or the binding depends on it",
  (suffix) => {
    let err: unknown;
    try {
      loadConfig({ [`KAFKA_PROP_${suffix}`]: "true", KAFKA_PROP_CLIENT_ID: "fine" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const lines = (err as ConfigError).message.split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toStartWith(`config error: KAFKA_PROP_${suffix}="true": ${kafkaPropName(suffix)} cannot be set here: `);
  },
);

test("under exactly-once (the default) KAFKA_PROP_ENABLE_IDEMPOTENCE and KAFKA_PROP_ACKS are refused, one line each naming them; at-least-once takes them", () => {
  let err: unknown;
  try {
    loadConfig({ KAFKA_PROP_ENABLE_IDEMPOTENCE: "false", KAFKA_PROP_ACKS: "1" });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  const lines = (err as ConfigError).message.split("\n").sort();
  expect(lines).toHaveLength(2);
  expect(lines[0]).toStartWith('config error: KAFKA_PROP_ACKS="1": acks cannot be set with DELIVERY=exactly-once: ');
  expect(lines[1]).toStartWith('config error: KAFKA_PROP_ENABLE_IDEMPOTENCE="false": enable.idempotence cannot be set with DELIVERY=exactly-once: ');
  const c = loadConfig({ DELIVERY: "at-least-once", KAFKA_PROP_ENABLE_IDEMPOTENCE: "false", KAFKA_PROP_ACKS: "1" });
  expect(c.kafka.props).toEqual({ "enable.idempotence": "false", acks: "1" });
});

test("kafkaPropVariable spells a property back as its variable", () => {
  for (const suffix of ["SECURITY_PROTOCOL", "LOG__LEVEL", "SASL_KERBEROS_SERVICE___NAME", "ENABLE_AUTO_COMMIT"])
    expect(kafkaPropVariable(kafkaPropName(suffix))).toBe(`KAFKA_PROP_${suffix}`);
});

test("a KAFKA_PROP_* librdkafka refuses exits 2 before any connection, one config error line per property, secrets not shown", async () => {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], {
    env: { PATH: process.env.PATH!, KAFKA_BROKERS: "127.0.0.1:1", KAFKA_PROP_NO_SUCH_THING: "1", KAFKA_PROP_SOCKET_TIMEOUT_MS: "soon", KAFKA_PROP_SASL_OAUTHBEARER_CLIENT_SECRET___X: "s3cret" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  expect(code).toBe(2);
  const lines = err.trim().split("\n").sort();
  expect(lines).toHaveLength(3);
  expect(lines[0]).toStartWith('config error: KAFKA_PROP_NO_SUCH_THING="1": librdkafka refuses no.such.thing: No such configuration property');
  expect(lines[1]).toStartWith("config error: KAFKA_PROP_SASL_OAUTHBEARER_CLIENT_SECRET___X=\"[redacted]\": librdkafka refuses");
  expect(lines[2]).toStartWith('config error: KAFKA_PROP_SOCKET_TIMEOUT_MS="soon": librdkafka refuses socket.timeout.ms: Invalid value');
  expect(err).not.toContain("s3cret");
});

// A URL with a password in it is echoed in configuration errors as the operator wrote it; the
// password must never be in a message, whatever else is wrong at the same time.
test("a password in CLICKHOUSE_URL appears in no configuration error, alone or beside every other", () => {
  const url = "http://ingest:s3cret-in-url@clickhouse:8123,ftp://ingest:s3cret-in-url@other";
  const everyBad: Record<string, string> = { CLICKHOUSE_URL: url };
  for (const name of Object.keys(VARIABLES)) if (name !== "CLICKHOUSE_URL") everyBad[name] = "\u0000 not valid 5e9 -1";
  for (const env of [{ CLICKHOUSE_URL: url }, everyBad]) {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as ConfigError).message;
    expect(message).toContain("CLICKHOUSE_URL=");
    expect(message).toContain("http://[redacted]@clickhouse:8123");
    expect(message).not.toContain("s3cret-in-url");
  }
});

test("CLICKHOUSE_DATABASE and CLICKHOUSE_TABLE are plain identifiers, checked once at start for every command", () => {
  for (const [name, value] of [["CLICKHOUSE_DATABASE", "telecom; DROP TABLE x"], ["CLICKHOUSE_TABLE", "cdr`x"], ["CLICKHOUSE_TABLE", "1cdr"]]) {
    let err: unknown;
    try {
      loadConfig({ [name!]: value! });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toStartWith(`config error: ${name}=${JSON.stringify(value)}: expected a plain identifier`);
  }
  expect(loadConfig({ CLICKHOUSE_DATABASE: "e2e_1", CLICKHOUSE_TABLE: "_cdr2" }).clickhouse.table).toBe("_cdr2");
});

test("BATCH_BACKLOG_ROWS: by default 10 × BATCH_SIZE within the memory bound's rows, never below BATCH_SIZE; set, at least BATCH_SIZE", () => {
  const rows = (env: Record<string, string>) => loadConfig(env).batch.backlogRows;
  expect(rows({ BATCH_SIZE: "100" })).toBe(1000);
  expect(rows({ BATCH_SIZE: "10000" })).toBe(10000); // 8192 rows fit the bound: no growth past BATCH_SIZE
  expect(rows({ BATCH_SIZE: "1000", BATCH_MAX_BYTES: String(64 << 20) })).toBe(10000);
  expect(rows({ BATCH_SIZE: "1000", BATCH_BACKLOG_ROWS: "1000" })).toBe(1000); // off
  expect(rows({ BATCH_SIZE: "1000", BATCH_BACKLOG_ROWS: "500" })).toBe(1000);
  expect(rows({ BATCH_SIZE: "1000", BATCH_BACKLOG_ROWS: "50000" })).toBe(50000);
});

test("SHUTDOWN_TIMEOUT_SECONDS: by default one insert's retry budget plus 10 s; set below it, a problem check refuses", () => {
  // 3 attempts of 10 s + 1 s each, 0.5 s + 1 s between them, 10 s for the commit: 44.5 s, whole seconds up.
  expect(loadConfig({}).shutdownTimeoutMs).toBe(45_000);
  const longer = { CH_RETRY_MAX_ATTEMPTS: "5", CH_RETRY_INITIAL_DELAY_MS: "1000", CH_RETRY_BACKOFF_FACTOR: "2" };
  expect(loadConfig(longer).shutdownTimeoutMs).toBe(80_000); // 5 × 11 + 1 + 2 + 4 + 8 + 10
  expect(loadConfig({ SHUTDOWN_TIMEOUT_SECONDS: "" }).shutdownTimeoutMs).toBe(45_000);
  expect(shutdownBelowBudget(loadConfig({}))).toBeNull();
  expect(shutdownBelowBudget(loadConfig({ SHUTDOWN_TIMEOUT_SECONDS: "45" }))).toBeNull();
  const short = shutdownBelowBudget(loadConfig({ ...longer, SHUTDOWN_TIMEOUT_SECONDS: "30" }));
  expect(short).toMatchObject({ variable: "SHUTDOWN_TIMEOUT_SECONDS", value: "30" });
  expect(short!.expected).toStartWith("expected at least 80: one insert's retry budget");
  expect(() => loadConfig({ SHUTDOWN_TIMEOUT_SECONDS: "0" })).toThrow(`SHUTDOWN_TIMEOUT_SECONDS="0": expected a number from 1 to 3600`);
});

// The cutoff of the older MAC forms (docs/security.md) as the operator writes it, into the key the
// commands build: from that instant an older form's envelope proves nothing, form 3's still does.
test("DLQ_PROVENANCE_OLDER_FORMS_UNTIL: a date is its UTC midnight, a time its instant, the key disowns the older forms from it; any other text is one line", () => {
  const key = "k".repeat(32);
  expect(loadConfig({ DLQ_PROVENANCE_OLDER_FORMS_UNTIL: "2027-01-15" }).dlq.olderFormsUntil).toBe(Date.UTC(2027, 0, 15));
  expect(loadConfig({ DLQ_PROVENANCE_OLDER_FORMS_UNTIL: "2027-01-15T06:00:00+02:00" }).dlq.olderFormsUntil).toBe(Date.UTC(2027, 0, 15, 4));
  expect(loadConfig({}).dlq.olderFormsUntil).toBeUndefined();
  const digest = payloadDigest('{"raw_id":"r"}');
  const signer = provenanceKeyOf(loadConfig({ DLQ_PROVENANCE_KEY: key }))!;
  const mac = signer.sign("cdr.raw", 1, 7, digest);
  const at = (until: string) => provenanceKeyOf(loadConfig({ DLQ_PROVENANCE_KEY: key, DLQ_PROVENANCE_OLDER_FORMS_UNTIL: until }))!;
  expect(at("2999-01-01").verify("cdr.raw", 1, 7, digest, mac, "2")).toBe(true);
  expect(at("2000-01-01").verify("cdr.raw", 1, 7, digest, mac, "2")).toBe(false);
  expect(() => loadConfig({ DLQ_PROVENANCE_OLDER_FORMS_UNTIL: "next year" })).toThrow(
    'config error: DLQ_PROVENANCE_OLDER_FORMS_UNTIL="next year": expected an ISO 8601 date (2027-01-15) or UTC time (2027-01-15T00:00:00Z)',
  );
});
