// TLS to Kafka and ClickHouse with the local CA (scripts/tls/make-certs.sh): the broker's SASL_SSL
// listener with SCRAM-SHA-512 (its user made by the broker's own tooling at start), ClickHouse's
// https port, secrets from files. Every wrong certificate or credential ends in exit 1 and a log
// line that names the cause, with nothing committed.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, props } from "../support/kafka.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { notReadyReasons, startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();
const TLS = `${ROOT}/.local/tls`;
const PORT = { ssl: 9095, saslSsl: 9096, expired: 9097, mismatch: 9098, https: 8443 };
const secrets = mkdtempSync(`${tmpdir()}/cdr-tls-`);
const secretFile = (name: string, value: string) => {
  writeFileSync(`${secrets}/${name}`, `${value}\n`);
  return `${secrets}/${name}`;
};

const saslSsl = (password: string, extra: Record<string, string> = {}) => ({
  KAFKA_BROKERS: `127.0.0.1:${PORT.saslSsl}`,
  KAFKA_PROP_SECURITY_PROTOCOL: "SASL_SSL",
  KAFKA_PROP_SASL_MECHANISM: "SCRAM-SHA-512",
  KAFKA_PROP_SASL_USERNAME: "cdr",
  KAFKA_PROP_SASL_PASSWORD_FILE: secretFile(`kafka-${password}`, password),
  KAFKA_PROP_SSL_CA_LOCATION: `${TLS}/ca.crt`,
  ...extra,
});

async function produceTwo(n: Names): Promise<void> {
  const p = new Producer(props);
  try {
    await p.produce(n.raw, toJson(withFields({ raw_id: "tls-1" })), { partition: 0 });
    await p.produce(n.raw, "not json", { partition: 0 });
  } finally {
    p.close();
  }
}

/** Runs `cdr-worker run` to its exit; returns the exit code, the stderr and how long it took. */
async function runToExit(env: Record<string, string>): Promise<{ code: number; err: string; ms: number }> {
  const t0 = Date.now();
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], { env, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, err, ms: Date.now() - t0 };
}

describe("Kafka over TLS", () => {
  test("SASL_SSL with SCRAM-SHA-512 and the local CA: the worker consumes, dead-letters and commits; the password (from a file) is never logged", async () => {
    const n = await names("tls");
    await produceTwo(n);
    const w = await startWorker(workerEnv(n, { ...saslSsl("cdr-scram-secret"), LOG_LEVEL: "debug" }));
    await statsWhen(w, (s) => s.total_clickhouse === 1 && s.total_dlq === 1 && s.partitions["0"]?.committed_offset === 2, 30_000, "both records durable over TLS");
    expect(await w.stop()).toBe(0);
    expect(w.logs.join("\n")).not.toContain("cdr-scram-secret");
  }, 60_000);

  test.each([
    ["a wrong CA", () => saslSsl("cdr-scram-secret", { KAFKA_PROP_SSL_CA_LOCATION: `${TLS}/other-ca.crt` }), /not signed by a CA the worker trusts \(ssl\.ca\.location\): wrong CA/],
    ["an expired certificate", () => ({ ...saslSsl("x"), KAFKA_BROKERS: `127.0.0.1:${PORT.expired}`, KAFKA_PROP_SECURITY_PROTOCOL: "SSL" }), /the broker's certificate has expired \(not valid after Jan  2 00:00:00 2020 GMT\)/],
    ["a host-name mismatch", () => ({ ...saslSsl("x"), KAFKA_BROKERS: `127.0.0.1:${PORT.mismatch}`, KAFKA_PROP_SECURITY_PROTOCOL: "SSL" }), /host name mismatch: the broker's certificate names DNS:wrong\.example\.invalid, not 127\.0\.0\.1/],
    ["a wrong SCRAM password", () => saslSsl("wrong-scram-password"), /Authentication failed|SASL authentication error|_AUTHENTICATION/],
  ])("%s: exit 1 with one log line naming the cause, no retry storm, nothing committed", async (_name, env, cause) => {
    const n = await names("tlsbad");
    await produceTwo(n);
    const { code, err, ms } = await runToExit(workerEnv(n, env()));
    expect(code).toBe(1);
    const fatal = err.split("\n").filter((l) => l.includes('"level":"error"'));
    expect(fatal.some((l) => cause.test(l))).toBe(true);
    expect(err.split("\n").filter((l) => cause.test(l)).length).toBeLessThan(10);
    expect(err).not.toContain("wrong-scram-password");
    // At the brokers' first refusal, not at the end of the 10 s metadata wait.
    expect(ms).toBeLessThan(8_000);
    expect([...committedOffsets(n.group, n.raw, 1).values()].every((o) => o < 0n)).toBe(true);
  }, 60_000);
});

describe("ClickHouse over https", () => {
  const https = `https://127.0.0.1:${PORT.https}`;

  test("CLICKHOUSE_URL=https://… with CLICKHOUSE_CA_CERT: rows land, and the password may come from a file", async () => {
    const n = await names("https");
    await produceTwo(n);
    const w = await startWorker(workerEnv(n, { CLICKHOUSE_URL: https, CLICKHOUSE_CA_CERT: `${TLS}/ca.crt`, CLICKHOUSE_PASSWORD_FILE: secretFile("ch", "") }));
    await statsWhen(w, (s) => s.total_clickhouse === 1 && s.ready?.ready === true, 30_000, "row inserted over https");
    expect(await w.stop()).toBe(0);
  }, 60_000);

  test("an untrusted certificate: migrate fails with a clear error, run refuses to start, and a running worker turns not ready", async () => {
    const n = await names("httpsbad");
    const env = { PATH: process.env.PATH!, CLICKHOUSE_URL: https, CLICKHOUSE_CA_CERT: `${TLS}/other-ca.crt`, CLICKHOUSE_DATABASE: n.database, CLICKHOUSE_TABLE: `${n.table}_m` };
    const migrate = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "migrate"], { env, stderr: "pipe" });
    expect(migrate.exitCode).toBe(1);
    expect(migrate.stderr.toString()).toMatch(/unable to verify the first certificate|self.signed|certificate/i);
    const run = await runToExit(workerEnv(n, { CLICKHOUSE_URL: https, CLICKHOUSE_CA_CERT: `${TLS}/other-ca.crt` }));
    expect(run.code).toBe(1);
    expect(run.err).toMatch(/cannot read the schema of .*certificate/i);
    // A worker that started trusted, whose ClickHouse then presents a certificate it cannot trust
    // (here: the proxy in front switches to a TLS endpoint with an expired certificate).
    const proxy = new TcpProxy("127.0.0.1", PORT.https);
    proxy.up();
    const w = await startWorker(workerEnv(n, { CLICKHOUSE_URL: `https://127.0.0.1:${proxy.port}`, CLICKHOUSE_CA_CERT: `${TLS}/ca.crt`, CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0" }));
    let swapped: TcpProxy | null = null;
    try {
      await waitFor(async () => ((await fetch(`${w.statsUrl}/readyz`)).status === 200 ? true : undefined), 30_000, "ready over https");
      swapped = new TcpProxy("127.0.0.1", PORT.expired);
      swapped.port = proxy.port;
      proxy.down();
      swapped.up();
      const reasons = await notReadyReasons(w, 30_000, "not ready once the certificate is untrusted");
      expect(reasons).toContain("ClickHouse does not answer ping");
    } finally {
      swapped?.down();
      proxy.down();
      w.proc.kill("SIGKILL");
    }
  }, 90_000);
});
