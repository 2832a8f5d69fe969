// Faults of people (DECISIONS "Commits and rebalances"): an operator's change refuses the worker
// itself, not its rows. Under the production profile (CH_UNREACHABLE_POLICY=wait) a read-only
// profile, a database taken away (allow_databases), a detached table and a password rotated in
// either order are waited out, /readyz names the refusal's code, and the worker goes on by itself
// once the change is undone or its password file holds the new secret: no valid record reaches
// the DLQ, each is stored once, no restart. A second worker joins mid-fault (its start-up check and
// the rebalance's replay check wait too). Under the spec's default the same refusal spends the retry
// budget before any envelope goes (test/e2e/storage-contract.test.ts, a table dropped). The faults are 18.16's own: its users.d file, reloaded within
// seconds, and DETACH TABLE; the answers are what the server and the client really produce.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { e2eScope } from "../support/e2e.ts";
import { readCommitted } from "../support/kafka.ts";
import { productionProfile } from "../support/profile.ts";
import { CLICKHOUSE_CURRENT_URL, CLICKHOUSE_URL, KAFKA_BROKERS, ROOT, uniqueName, waitFor } from "../support/services.ts";
import { produceSynthetic, steadyStream } from "../support/synthetic.ts";
import { explainedBy, startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const scope = e2eScope(CLICKHOUSE_URL);
const current = e2eScope(CLICKHOUSE_CURRENT_URL);
const USERS_D = join(ROOT, ".local/clickhouse/users.d");
const secrets = mkdtempSync(join(tmpdir(), "cdr-operator-faults-"));
const written: string[] = [];
afterAll(() => {
  for (const f of written) rmSync(f, { force: true });
  rmSync(secrets, { recursive: true, force: true });
});

interface UserState {
  password: string;
  readonly?: boolean;
  /** Only these databases (18.16's allow_databases); every one when absent. */
  databases?: string[];
}

/** A user of the test's own in 18.16's users.d, written whole and renamed into place (never half-read). */
function userFile(name: string) {
  mkdirSync(USERS_D, { recursive: true });
  const path = join(USERS_D, `${name}.xml`);
  written.push(path);
  return (u: UserState) => {
    const profile = u.readonly ? `${name}_ro` : "default";
    const dbs = u.databases ? `<allow_databases>${u.databases.map((d) => `<database>${d}</database>`).join("")}</allow_databases>` : "";
    const xml = `<?xml version="1.0"?>\n<yandex><profiles><${name}_ro><readonly>1</readonly></${name}_ro></profiles>` +
      `<users><${name}><password>${u.password}</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>` +
      `<profile>${profile}</profile><quota>default</quota>${dbs}</${name}></users></yandex>\n`;
    writeFileSync(`${path}.tmp`, xml);
    renameSync(`${path}.tmp`, path);
  };
}

/** Resolves once the server answers `user` with `password` as `expect` says (its reload is periodic). */
async function serverTakes(user: string, password: string, query: string, expectCode: string | null): Promise<void> {
  let last = "";
  // 18.16 looks at users.d every few seconds; on a machine busy with a whole test run (a root being
  // provisioned beside it), a change has taken it over 30 s. A failure says what it answered last.
  await waitFor(async () => {
    const r = await fetch(`${CLICKHOUSE_URL}/?user=${user}&password=${encodeURIComponent(password)}`, { method: "POST", body: query });
    const body = await r.text();
    last = body.slice(0, 200);
    const code = /Code: (\d+)/.exec(body)?.[1] ?? null;
    return code === expectCode ? true : undefined;
  }, 90_000, `the server answers ${user}'s ${query} with ${expectCode ?? "success"}`).catch((e: Error) => {
    throw new Error(`${e.message}; its last answer: ${JSON.stringify(last)}`);
  });
}

function passwordFile(name: string, value: string): string {
  const path = join(secrets, name);
  writeFileSync(path, `${value}\n`);
  return path;
}

/**
 * Waits until /readyz names the refusal's code (any code where null), and checks no envelope went
 * meanwhile.
 */
async function refusedFor(w: RunningWorker, code: number | null): Promise<void> {
  const named = code === null ? /refuses the worker: code \d+/ : new RegExp(`refuses the worker: code ${code}\\b`);
  let last: string[] = [];
  const reasons = await explainedBy(w, () => waitFor(async () => {
    const res = await fetch(`${w.statsUrl}/readyz`);
    last = ((await res.json()) as { reasons: string[] }).reasons;
    return named.test(last.join(" ")) ? last : undefined;
  }, 30_000, `/readyz naming code ${code}`).catch((e) => {
    throw new Error(`${(e as Error).message}; /readyz said ${JSON.stringify(last)}`);
  }));
  expect(reasons.join(" ")).toMatch(named);
  expect(reasons.join(" ")).not.toContain("password");
  expect((await w.stats()).total_dlq).toBe(0);
}

test("18.16, the production profile: read-only, a database taken away, a detached table and a password rotated both ways are waited out; a worker joins mid-fault; 0 envelopes, every record once", async () => {
  const n = await scope.names("operator");
  const user = uniqueName("ops").replace(/\W/g, "_");
  const setUser = userFile(user);
  setUser({ password: "first-secret" });
  await serverTakes(user, "first-secret", "SELECT 1", null);
  const file = passwordFile(`${user}-password`, "first-secret");
  const env = workerEnv(n, { ...productionProfile(), CLICKHOUSE_USER: user, CLICKHOUSE_PASSWORD_FILE: file });
  const w1 = await startWorker(env);
  let w2: RunningWorker | undefined;
  const stream = steadyStream(n.raw, { perRound: 40, pauseMs: 100, seed: 700, rounds: 100_000 });
  try {
    await statsWhen(w1, (s) => s.total_clickhouse > 0, 30_000, "first rows stored");
    const table = `${n.database}.${n.table}`;

    // 1. A read-only profile for 10 s (code 164); a second worker starts meanwhile: its start-up
    //    check waits, then the rebalance's replay check does.
    setUser({ password: "first-secret", readonly: true });
    // A write that stores nothing of the table's: the probe must not add rows to the count.
    await serverTakes(user, "first-secret", `CREATE TABLE IF NOT EXISTS default.${user}_probe (a UInt8) ENGINE = Memory`, "164");
    await refusedFor(w1, 164);
    const w2start = startWorker(env);
    await Bun.sleep(10_000);
    setUser({ password: "first-secret" });
    w2 = await w2start;
    // The rebalance settled: every partition owned and checked, so the next fault meets inserts.
    const both = [w1, w2];
    await waitFor(async () => {
      const all = await Promise.all(both.map((w) => w.stats()));
      const owned = all.reduce((k, s) => k + s.assigned_partitions.length, 0);
      return owned === 3 && all.every((s) => s.replay_checks_pending === 0) ? true : undefined;
    }, 60_000, "both workers own their partitions, checked");
    const stored = (await w1.stats()).total_clickhouse;
    await statsWhen(w1, (s) => s.total_clickhouse > stored, 60_000, "stored again after read-only");

    // 2. The database taken away (allow_databases, code 291) for 10 s.
    setUser({ password: "first-secret", databases: ["default"] });
    await serverTakes(user, "first-secret", `SELECT count() FROM ${table}`, "291");
    await refusedFor(w1, 291);
    await Bun.sleep(10_000);
    setUser({ password: "first-secret" });
    await serverTakes(user, "first-secret", `SELECT count() FROM ${table}`, null);

    // 3. The table detached for 10 s (code 60), as maintenance does.
    await scope.ch.command({ query: `DETACH TABLE ${table}` });
    await refusedFor(w1, 60);
    await Bun.sleep(10_000);
    await scope.ch.command({ query: `ATTACH TABLE ${table}` });

    // 4. The password rotated on the server first (code 193), the file 10 s later.
    setUser({ password: "second-secret" });
    await serverTakes(user, "second-secret", "SELECT 1", null);
    await refusedFor(w1, 193);
    await Bun.sleep(10_000);
    writeFileSync(file, "second-secret\n");

    // 5. The file first, the server 5 s later: the file's secret is taken at the next refusal.
    const before = (await w1.stats()).total_clickhouse;
    await statsWhen(w1, (s) => s.total_clickhouse > before, 60_000, "stored again after the server-first rotation");
    writeFileSync(file, "third-secret\n");
    await Bun.sleep(5_000);
    setUser({ password: "third-secret" });
    await serverTakes(user, "third-secret", "SELECT 1", null);
    const after = (await w1.stats()).total_clickhouse;
    await statsWhen(w1, (s) => s.total_clickhouse > after, 60_000, "stored again after the file-first rotation");

    // 6. A column retyped for 10 s: the binary rows no longer fit (the server reads 8 bytes where the
    //    worker wrote 4), which the writer tells from a refusal of the rows by looking at the table.
    await scope.ch.command({ query: `ALTER TABLE ${table} MODIFY COLUMN duration_seconds UInt64` });
    await refusedFor(w1, null);
    await Bun.sleep(10_000);
    await scope.ch.command({ query: `ALTER TABLE ${table} MODIFY COLUMN duration_seconds UInt32` });

    await stream.stop();
    const sent = stream.sent();
    const settled = async (w: RunningWorker) => (await w.stats()) as Record<string, any>;
    await waitFor(async () => {
      const [a, b] = [await settled(w1), await settled(w2!)];
      return a.in_flight_buffer === 0 && b.in_flight_buffer === 0 && a.total_clickhouse + b.total_clickhouse >= sent ? true : undefined;
    }, 90_000, "every record stored by the two workers");
    const [a, b] = [await settled(w1), await settled(w2!)];
    console.log(`operator faults: ${JSON.stringify({ sent, w1: a.total_clickhouse, w2: b.total_clickhouse, dlq: a.total_dlq + b.total_dlq, retries: a.clickhouse_retries + b.clickhouse_retries })}`);
    expect(a.total_dlq + b.total_dlq).toBe(0);
    expect(a.clickhouse_exhausted_batches + b.clickhouse_exhausted_batches).toBe(0);
    expect(await w1.stop()).toBe(0);
    expect(await w2!.stop()).toBe(0);
    expect(await scope.storedCounts(n)).toEqual({ rows: sent, ids: sent, offsetRows: sent, offsets: sent });
    expect(await readCommitted(n.dlq)).toHaveLength(0);
  } finally {
    await stream.stop();
    w1.proc.kill("SIGKILL");
    w2?.proc.kill("SIGKILL");
    await scope.ch.command({ query: `DROP TABLE IF EXISTS default.${user}_probe` });
  }
}, 300_000);

test("26.9 engine, the production profile: a column renamed away for 10 s and back is waited out; 0 envelopes, every record once", async () => {
  const n = await current.names("operator-rename");
  const w = await startWorker(workerEnv(n, productionProfile()));
  const stream = steadyStream(n.raw, { perRound: 40, pauseMs: 100, seed: 900, rounds: 100_000 });
  try {
    await statsWhen(w, (s) => s.total_clickhouse > 0, 30_000, "first rows stored");
    const table = `${n.database}.${n.table}`;
    await current.ch.command({ query: `ALTER TABLE ${table} RENAME COLUMN device_id TO device_id_renamed` });
    await refusedFor(w, 16);
    await Bun.sleep(10_000);
    await current.ch.command({ query: `ALTER TABLE ${table} RENAME COLUMN device_id_renamed TO device_id` });
    const before = (await w.stats()).total_clickhouse;
    await statsWhen(w, (s) => s.total_clickhouse > before, 60_000, "stored again once the column is back");
    await stream.stop();
    const sent = stream.sent();
    const s = await statsWhen(w, (s) => s.total_clickhouse === sent && s.in_flight_buffer === 0, 60_000, "every record stored");
    expect(s.total_dlq).toBe(0);
    expect(await w.stop()).toBe(0);
    expect(await current.storedCounts(n)).toEqual({ rows: sent, ids: sent, offsetRows: sent, offsets: sent });
  } finally {
    await stream.stop();
    w.proc.kill("SIGKILL");
  }
}, 120_000);

test("18.16: the group's committed offsets deleted while no worker runs: the offsets table stands in, none stored twice", async () => {
  const n = await scope.names("operator-offsets");
  const env = workerEnv(n, productionProfile());
  const first = await produceSynthetic(n.raw, 3000, 0, 950);
  let w = await startWorker(env);
  await statsWhen(w, (s) => s.total_clickhouse === first.valid && s.in_flight_buffer === 0, 60_000, "the first records stored");
  expect(await w.stop()).toBe(0);
  // As an operator would: kafka-consumer-groups --delete, with no member in the group.
  const tool = Bun.spawn(
    ["java", "-Xmx256m", "-cp", `${ROOT}/.local/kafka/libs/*`, `-Dlog4j2.configurationFile=${ROOT}/scripts/kafka/log4j2.yaml`,
      "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", KAFKA_BROKERS, "--delete", "--group", n.group],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [code, err] = await Promise.all([tool.exited, new Response(tool.stderr).text()]);
  expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
  const second = await produceSynthetic(n.raw, 5000, 0, 951);
  const total = first.valid + second.valid;
  w = await startWorker(env);
  try {
    // From the log start again: the first records are read twice and skipped, the rest stored.
    const s = await statsWhen(w, (s) => s.total_clickhouse + s.replays_skipped >= total && s.in_flight_buffer === 0, 90_000, "every record read again or stored");
    expect(s.total_dlq).toBe(0);
    expect(await w.stop()).toBe(0);
    expect(await scope.storedCounts(n)).toEqual({ rows: total, ids: total, offsetRows: total, offsets: total });
  } finally {
    w.proc.kill("SIGKILL");
  }
}, 180_000);
