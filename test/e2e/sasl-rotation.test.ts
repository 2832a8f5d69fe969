// Kafka's SASL password follows its file (src/kafka/sasl-credentials.ts): a SCRAM password rotated on
// the broker, then in the worker's file, with no restart, loses nothing, stores nothing twice and
// sends nothing to the DLQ. The SASL_SSL listener's SCRAM users take new credentials live. Then
// the worker's own connections to the broker are ended (`ss -K`, its sockets alone), so that every
// client authenticates anew: a worker that kept the old password would be refused.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { e2eScope } from "../support/e2e.ts";
import { readCommitted } from "../support/kafka.ts";
import { productionProfile } from "../support/profile.ts";
import { KAFKA_BROKERS, ROOT, uniqueName, waitFor } from "../support/services.ts";
import { steadyStream } from "../support/synthetic.ts";
import { explainedBy, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const scope = e2eScope();
const TLS = `${ROOT}/.local/tls`;
const SASL_SSL_PORT = 9096;
const dir = mkdtempSync(join(tmpdir(), "cdr-sasl-rotation-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Kafka's ConfigCommand: kafka.admin's up to 4.1, org.apache.kafka.tools' from 4.2. */
async function configCommand(...args: string[]): Promise<void> {
  const libs = await Array.fromAsync(new Bun.Glob("kafka_2.13-4.[01].*.jar").scan(`${ROOT}/.local/kafka/libs`));
  const main = libs.length ? "kafka.admin.ConfigCommand" : "org.apache.kafka.tools.ConfigCommand";
  const tool = Bun.spawn(
    ["java", "-Xmx256m", "-cp", `${ROOT}/.local/kafka/libs/*`, `-Dlog4j2.configurationFile=${ROOT}/scripts/kafka/log4j2.yaml`,
      main, "--bootstrap-server", KAFKA_BROKERS, "--alter", ...args],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [code, err] = await Promise.all([tool.exited, new Response(tool.stderr).text()]);
  if (code !== 0) throw new Error(`ConfigCommand ${args.join(" ")} exited ${code}: ${err}`);
}

/** Ends the TCP connections process `pid` holds to `port` (ss -K, by each local port), as a network would. */
async function endConnections(pid: number, port: number): Promise<number> {
  const list = Bun.spawnSync(["ss", "-tnpH", "state", "established", "dport", "=", `:${port}`]).stdout.toString();
  const mine = list.split("\n").filter((l) => l.includes(`pid=${pid},`));
  for (const line of mine) {
    const local = line.trim().split(/\s+/)[2]!; // Recv-Q Send-Q Local Peer Process
    const sport = local.slice(local.lastIndexOf(":") + 1);
    Bun.spawnSync(["ss", "-K", "sport", "=", `:${sport}`, "dport", "=", `:${port}`]);
  }
  return mine.length;
}

const scram = (user: string, password: string) =>
  configCommand("--entity-type", "users", "--entity-name", user, "--add-config", `SCRAM-SHA-512=[password=${password}]`);

test("a SCRAM password rotated on the broker, then in the worker's file: no restart, nothing lost or twice, no envelope", async () => {
  const n = await scope.names("sasl-rotation");
  const user = uniqueName("rot").replace(/\W/g, "_");
  await scram(user, "first-scram-secret");
  const file = join(dir, "kafka-password");
  writeFileSync(file, "first-scram-secret\n");
  const w = await startWorker(workerEnv(n, {
    ...productionProfile(),
    KAFKA_BROKERS: `127.0.0.1:${SASL_SSL_PORT}`,
    KAFKA_PROP_SECURITY_PROTOCOL: "SASL_SSL",
    KAFKA_PROP_SASL_MECHANISM: "SCRAM-SHA-512",
    KAFKA_PROP_SASL_USERNAME: user,
    KAFKA_PROP_SASL_PASSWORD_FILE: file,
    KAFKA_PROP_SSL_CA_LOCATION: `${TLS}/ca.crt`,
  }));
  const stream = steadyStream(n.raw, { perRound: 20, pauseMs: 100, seed: 970, rounds: 100_000 });
  try {
    await statsWhen(w, (s) => s.total_clickhouse > 0, 30_000, "first rows stored over SASL_SSL");
    await scram(user, "second-scram-secret");
    await Bun.sleep(3_000);
    writeFileSync(file, "second-scram-secret\n");
    await explainedBy(w, () => waitFor(() => (w.logs.some((l) => l.includes("takes the new SASL password")) ? true : undefined), 30_000, "the new password set on the clients"));
    // Every connection of the worker's to the broker ended: each client authenticates anew.
    expect(await endConnections(w.proc.pid, SASL_SSL_PORT)).toBeGreaterThan(0);
    const at = (await w.stats()).total_clickhouse;
    await statsWhen(w, (s) => s.total_clickhouse > at + 200, 30_000, "records stored after the new authentications");
    await stream.stop();
    const sent = stream.sent();
    const s = await statsWhen(w, (s) => s.total_clickhouse === sent && s.in_flight_buffer === 0, 60_000, "every record stored");
    expect(s.total_dlq).toBe(0);
    expect(await w.stop()).toBe(0);
    expect(w.logs.join("\n")).not.toMatch(/first-scram-secret|second-scram-secret/);
    expect(await scope.storedCounts(n)).toEqual({ rows: sent, ids: sent, offsetRows: sent, offsets: sent });
    expect(await readCommitted(n.dlq)).toHaveLength(0);
  } finally {
    await stream.stop();
    w.proc.kill("SIGKILL");
  }
}, 180_000);
