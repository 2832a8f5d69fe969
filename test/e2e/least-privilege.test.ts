// The worker under exactly the privileges `migrate --print-grants` lists for its role, and dlq fill
// and audit under the DLQ table's own role. On the 26.9 engine the engine itself checks them on
// every statement (chdb-http.py --grants gives its one user the role's grants and nothing else): the
// worker ingests, replays its check after a restart, and `audit` reads; DDL is refused, and so is
// any write to the DLQ table under the worker's role. A grant missing stops the worker at start with one line naming it, on the
// 26.9 engine (a grant left out of the role) and on 18.16 (a users.xml user with readonly=2, as
// 18.16 has no SQL grants). `migrate --role` on 18.16 says why it cannot and exits 2.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { userStatements } from "../../src/clickhouse/grants.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { startChdbEndpoint } from "../support/chdb.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();
const secrets = mkdtempSync(`${tmpdir()}/cdr-least-privilege-`);
afterAll(() => rmSync(secrets, { recursive: true, force: true }));

const cli = (env: Record<string, string>, ...args: string[]) => {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, ...args], { env: { ...env, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
};

async function produce(topic: string, values: string[]): Promise<void> {
  const p = new Producer(props);
  try {
    await Promise.all(values.map((v) => p.produce(topic, v, { partition: 0 })));
  } finally {
    p.close();
  }
}

/** The names on an engine of its own at `url`: topics from `names`, the table made by `migrate` there. */
function onEndpoint(n: Names, url: string): Names {
  const m = { ...n, clickhouseUrl: url };
  const made = cli(workerEnv(m), "migrate");
  expect({ code: made.code, stderr: made.stderr }).toEqual({ code: 0, stderr: "" });
  return m;
}

const N = 60;
const INVALID = new Set([5, 17, 40]);
const records = Array.from({ length: N }, (_, i) => (INVALID.has(i) ? `not json ${i}` : toJson(withFields({ raw_id: `lp-${i}` }))));

test("26.9: the worker runs, restarts and audits under its role alone, dlq fill and audit's table check under the DLQ role; DDL and the DLQ table are refused to the worker", async () => {
  const n0 = await names("least-priv");
  const dir = `${ROOT}/.local/tmp/least-privilege-${Date.now().toString(36)}`;
  const admin = await startChdbEndpoint({ dir });
  let limited: Awaited<ReturnType<typeof startChdbEndpoint>> | undefined;
  let dlqRole: Awaited<ReturnType<typeof startChdbEndpoint>> | undefined;
  try {
    const n = onEndpoint(n0, admin.url);
    const printed = cli(workerEnv(n), "migrate", "--print-grants", "--user", "cdr_worker", "--dlq-user", "cdr_dlq");
    expect(printed.code).toBe(0);
    const statements = printed.stdout.trim().split("\n");
    expect(statements).toEqual([
      "CREATE ROLE IF NOT EXISTS cdr_worker;",
      "REVOKE ALL ON *.* FROM cdr_worker;",
      `GRANT INSERT, SELECT ON e2e.${n.table} TO cdr_worker;`,
      `GRANT SELECT ON e2e.${n.table}_offsets TO cdr_worker;`,
      "GRANT SELECT ON system.columns TO cdr_worker;",
      "GRANT SELECT ON system.processes TO cdr_worker;",
      "GRANT cdr_worker TO cdr_worker;",
      "SET DEFAULT ROLE cdr_worker TO cdr_worker;",
      "CREATE ROLE IF NOT EXISTS cdr_dlq;",
      "REVOKE ALL ON *.* FROM cdr_dlq;",
      `GRANT INSERT, SELECT ON e2e.${n.table}_dlq TO cdr_dlq;`,
      `GRANT SELECT ON e2e.${n.table} TO cdr_dlq;`,
      `GRANT SELECT ON e2e.${n.table}_offsets TO cdr_dlq;`,
      "GRANT SELECT ON system.columns TO cdr_dlq;",
      "GRANT SELECT ON system.processes TO cdr_dlq;",
      "GRANT cdr_dlq TO cdr_dlq;",
      "SET DEFAULT ROLE cdr_dlq TO cdr_dlq;",
    ]);
    const roleGrants = (role: string) => statements.filter((s) => s.endsWith(`TO ${role};`)).join("\n");
    // Each is 26.9's SQL (the engine parses and formats it; it has no role storage to run it in).
    const adminCh = createClient({ url: admin.url });
    for (const s of [...statements, ...userStatements("cdr_worker", "a password")]) {
      const rs = await adminCh.query({ query: "SELECT formatQuery({s:String}) AS f", query_params: { s }, format: "JSONEachRow" });
      expect(((await rs.json<{ f: string }>())[0]!.f).length).toBeGreaterThan(0);
    }
    await adminCh.close();
    await admin.stop();

    const grants = `${secrets}/grants.sql`;
    writeFileSync(grants, roleGrants("cdr_worker"));
    writeFileSync(`${secrets}/password`, "role-test-secret\n", { mode: 0o600 });
    limited = await startChdbEndpoint({ dir, grants, user: "cdr_worker", password: "role-test-secret" });
    const m = { ...n, clickhouseUrl: limited.url };
    const env = workerEnv(m, { CLICKHOUSE_USER: "cdr_worker", CLICKHOUSE_PASSWORD_FILE: `${secrets}/password` });
    const ch = createClient({ url: limited.url, username: "cdr_worker", password: "role-test-secret", database: "e2e", log: { level: ClickHouseLogLevel.OFF } });
    try {
      // The role holds nothing beyond the list: no DDL, no other table.
      const refusedType = (e: { type?: string; message: string }) => e.type ?? e.message;
      expect(await ch.command({ query: `DROP TABLE e2e.${n.table}` }).then(() => "dropped", refusedType)).toBe("ACCESS_DENIED");
      const create = `CREATE TABLE e2e.${n.table}_2 (x UInt8) ENGINE = MergeTree ORDER BY x`;
      expect(await ch.command({ query: create }).then(() => "created", refusedType)).toBe("ACCESS_DENIED");
      // Nor may it write or read the DLQ table: a forged row there cannot come through its credentials.
      const forge = `INSERT INTO e2e.${n.table}_dlq (dlq_partition, dlq_offset) VALUES (0, 99)`;
      expect(await ch.command({ query: forge }).then(() => "inserted", refusedType)).toBe("ACCESS_DENIED");
      const peek = `SELECT count() FROM e2e.${n.table}_dlq`;
      expect(await ch.query({ query: peek }).then(() => "read", refusedType)).toBe("ACCESS_DENIED");
      await produce(n.raw, records.slice(0, 40));
      let w = await startWorker(env);
      let s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 40, 30_000, "first 40 committed");
      expect(await w.stop()).toBe(0);
      expect(s.total_dlq).toBe(2);
      // A restart runs the replay check (a SELECT on the table) before it takes the rest.
      await produce(n.raw, records.slice(40));
      w = await startWorker(env);
      s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === N, 30_000, "all committed");
      expect(await w.stop()).toBe(0);
      expect(w.logs.filter((l) => l.includes('"level":"error"'))).toEqual([]);
      const count = async (t: string) => Number((await (await ch.query({ query: `SELECT count() AS c FROM e2e.${t}`, format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);
      expect(await count(n.table)).toBe(N - INVALID.size);
      // The view kept the offsets table under the worker's user's inserts.
      expect(await count(`${n.table}_offsets`)).toBe(N - INVALID.size);
      // Its own queries it may end without KILL QUERY, as the lost-answer path does.
      await ch.command({ query: "KILL QUERY WHERE query_id = 'cdr-worker:no-such-query' SYNC" });
      // Its audit checks the raw topic against the tables, and says it may not read the DLQ table.
      const audit = cli(env, "audit");
      expect(audit.code).toBe(0);
      expect(audit.stdout).toContain('"audit":"clean"');
      expect(audit.stderr.trim().split("\n").map((l) => JSON.parse(l).msg)).toEqual([
        `ClickHouse user cdr_worker may not read e2e.${n.table}_dlq: run audit as the DLQ table's user (migrate --dlq-role; docs/security.md) to check it`,
      ]);
    } finally {
      await ch.close();
    }
    await limited.stop();
    // The DLQ role, as its own user: the filler's inserts, its position and the end of its own
    // inserts; then audit with the DLQ table's check.
    writeFileSync(grants, roleGrants("cdr_dlq"));
    writeFileSync(`${secrets}/dlq-password`, "dlq-role-secret\n", { mode: 0o600 });
    dlqRole = await startChdbEndpoint({ dir, grants, user: "cdr_dlq", password: "dlq-role-secret" });
    const d = { ...n, clickhouseUrl: dlqRole.url };
    const dlqEnv = workerEnv(d, { CLICKHOUSE_USER: "cdr_dlq", CLICKHOUSE_PASSWORD_FILE: `${secrets}/dlq-password` });
    const dch = createClient({ url: dlqRole.url, username: "cdr_dlq", password: "dlq-role-secret", database: "e2e", log: { level: ClickHouseLogLevel.OFF } });
    try {
      const refusedType = (e: { type?: string; message: string }) => e.type ?? e.message;
      // The DLQ role writes nothing but the DLQ table.
      const insert = `INSERT INTO e2e.${n.table} (kafka_partition) SELECT CAST(0 AS Int32) FROM system.one WHERE 0`;
      expect(await dch.command({ query: insert }).then(() => "inserted", refusedType)).toBe("ACCESS_DENIED");
      const count = async (t: string) => Number((await (await dch.query({ query: `SELECT count() AS c FROM e2e.${t}`, format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);
      const fill = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "fill"], { env: { ...dlqEnv, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
      try {
        await waitFor(async () => ((await count(`${n.table}_dlq`)) === INVALID.size ? true : undefined), 30_000, "the DLQ table filled");
      } catch (e) {
        fill.kill("SIGKILL");
        throw e;
      }
      fill.kill("SIGTERM");
      const [fillCode, fillErr] = await Promise.all([fill.exited, new Response(fill.stderr).text()]);
      expect({ code: fillCode, stderr: fillErr }).toEqual({ code: 0, stderr: "" });
      const audit = cli(dlqEnv, "audit");
      expect({ code: audit.code, stderr: audit.stderr }).toEqual({ code: 0, stderr: "" });
      expect(audit.stdout).toContain('"audit":"clean"');
      expect(audit.stdout).toContain('"dlq_table_findings":0');
    } finally {
      await dch.close();
    }
    await dlqRole.stop();
    // The worker's user, now that the filler has committed: audit says the table went unchecked, and why.
    writeFileSync(grants, roleGrants("cdr_worker"));
    limited = await startChdbEndpoint({ dir, grants, user: "cdr_worker", password: "role-test-secret" });
    const workerAgain = workerEnv({ ...n, clickhouseUrl: limited.url }, { CLICKHOUSE_USER: "cdr_worker", CLICKHOUSE_PASSWORD_FILE: `${secrets}/password` });
    const asWorker = cli(workerAgain, "audit");
    expect(asWorker.code).toBe(0);
    expect(asWorker.stdout).toContain('"audit":"clean"');
    expect(asWorker.stdout).toContain(`"dlq_table":"not_checked","why":"ClickHouse user cdr_worker may not read e2e.${n.table}_dlq`);
    // trace, as the worker's user, finds a dead-lettered record in the DLQ topic instead.
    const traced = cli(workerAgain, "trace", "--partition", "0", "--offset", "5");
    expect({ code: traced.code, verdict: JSON.parse(traced.stdout.trim().split("\n").at(-1)!).verdict }).toEqual({ code: 0, verdict: "dead_lettered" });
    expect(traced.stderr).toContain(`ClickHouse user cdr_worker may not read e2e.${n.table}_dlq: the DLQ topic is read instead`);
  } finally {
    await admin.stop();
    await limited?.stop();
    await dlqRole?.stop();
    rmSync(dir, { recursive: true, force: true });
    for (const d of [`${dir}-spool`, `${dir}-config`]) rmSync(d, { recursive: true, force: true });
  }
}, 120_000);

test("26.9: a grant left out of the role stops the worker at start with one line naming it", async () => {
  const n0 = await names("least-priv-missing");
  const dir = `${ROOT}/.local/tmp/least-privilege-missing-${Date.now().toString(36)}`;
  const admin = await startChdbEndpoint({ dir });
  let limited: Awaited<ReturnType<typeof startChdbEndpoint>> | undefined;
  try {
    const n = onEndpoint(n0, admin.url);
    const printed = cli(workerEnv(n), "migrate", "--print-grants");
    await admin.stop();
    const grants = `${secrets}/grants-missing.sql`;
    // The engine enforces grants on tables; its system tables it lets every user read (clickhouse-local
    // has no select_from_system_db_requires_grant), so the grant left out is the table's SELECT.
    const workerRole = printed.stdout.split("\n").filter((l) => l.endsWith("TO cdr_worker;")).join("\n");
    writeFileSync(grants, workerRole.replace(`GRANT INSERT, SELECT ON e2e.${n.table}`, `GRANT INSERT ON e2e.${n.table}`));
    limited = await startChdbEndpoint({ dir, grants });
    const started = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "run"], { env: workerEnv({ ...n, clickhouseUrl: limited.url }), stdout: "pipe", stderr: "pipe", timeout: 50_000 });
    expect(started.exitCode).toBe(2);
    const lines = started.stderr.toString().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toStartWith(`ClickHouse user default lacks SELECT ON e2e.${n.table}, which the worker needs to read which rows are stored`);
    expect(lines[0]).toContain("ACCESS_DENIED");
  } finally {
    await admin.stop();
    await limited?.stop();
    for (const d of [dir, `${dir}-spool`, `${dir}-config`]) rmSync(d, { recursive: true, force: true });
  }
}, 120_000);

test("18.16: a user who may not write (readonly=2, 18.16's users.xml) stops the worker at start, naming INSERT", async () => {
  const n = await names("least-priv-1816");
  const started = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "run"], { env: workerEnv(n, { CLICKHOUSE_USER: "reader" }), stdout: "pipe", stderr: "pipe", timeout: 50_000 });
  expect(started.exitCode).toBe(2);
  const lines = started.stderr.toString().trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith(`ClickHouse user reader lacks INSERT ON e2e.${n.table}, which the worker needs to insert batches`);
  expect(lines[0]).toContain("Code: 164");
});

test("18.16: migrate --role says the server has no SQL roles and exits 2, after migrating", async () => {
  const n = await names("least-priv-role-1816");
  const made = cli(workerEnv(n), "migrate", "--role", "cdr_worker");
  expect(made.code).toBe(2);
  expect(made.stdout).toContain(`"migrated":"e2e.${n.table}"`);
  expect(made.stderr.trim()).toMatch(/^config error: ClickHouse 18\.16\.\S+ has no SQL roles or users \(20\.4 added them\): define the worker's user in users\.xml/);
});

test("26.9: migrate --role --user passes the version gate and sends the user's statement with its password's SHA-256", async () => {
  // The engine has no writable access storage (clickhouse-local), so its own refusal of CREATE USER is
  // the furthest a run gets here: what it shows is that every statement before it is the engine's SQL,
  // and that the password reaches it as its SHA-256, never itself in the text or the error.
  const n0 = await names("least-priv-role-269");
  const admin = await startChdbEndpoint({});
  try {
    const n = onEndpoint(n0, admin.url);
    writeFileSync(`${secrets}/role-password`, "never-in-any-message\n", { mode: 0o600 });
    const made = cli(workerEnv(n), "migrate", "--role", "cdr_worker", "--user", "cdr_worker", "--password-file", `${secrets}/role-password`);
    expect(made.code).toBe(1);
    expect(made.stdout).toContain(`"migrated":"e2e.${n.table}"`);
    // The engine's own refusal of the statement itself: it has no access management to create users.
    expect(made.stderr).toContain("CREATE USER");
    expect(made.stderr).toContain('"code":"497"');
    expect(made.stderr + made.stdout).not.toContain("never-in-any-message");
  } finally {
    await admin.stop();
  }
});

test("26.9: the DLQ table's analyst reads every column but the payload, the view included; the reader reads the payload", async () => {
  const n0 = await names("least-priv-dlq");
  const dir = `${ROOT}/.local/tmp/least-privilege-dlq-${Date.now().toString(36)}`;
  const admin = await startChdbEndpoint({ dir });
  const open: Array<Awaited<ReturnType<typeof startChdbEndpoint>>> = [];
  try {
    const n = onEndpoint(n0, admin.url);
    const printed = cli(workerEnv(n), "migrate", "--print-reader-grants");
    expect(printed.code).toBe(0);
    const statements = printed.stdout.trim().split("\n");
    expect(statements.filter((s) => s.startsWith("GRANT")).map((s) => s.replace(/\(.*\)/, "(…)"))).toEqual([
      `GRANT SELECT ON e2e.${n.table}_dlq TO cdr_dlq_reader;`,
      `GRANT SELECT ON e2e.${n.table}_dlq_summary TO cdr_dlq_reader;`,
      `GRANT SELECT(…) ON e2e.${n.table}_dlq TO cdr_dlq_analyst;`,
      `GRANT SELECT ON e2e.${n.table}_dlq_summary TO cdr_dlq_analyst;`,
    ]);
    const adminCh = createClient({ url: admin.url });
    for (const s of statements) {
      const rs = await adminCh.query({ query: "SELECT formatQuery({s:String}) AS f", query_params: { s }, format: "JSONEachRow" });
      expect(((await rs.json<{ f: string }>())[0]!.f).length).toBeGreaterThan(0);
    }
    const row = { failed_at: "2026-12-01 10:00:00", failure_reason: "malformed_json", dlq_partition: 0, dlq_offset: 0, original_payload: "{\"caller_num\":\"+447700900123\"", device_id: "d1", stored_at: "2026-12-01 10:00:00" };
    await adminCh.insert({ table: `e2e.${n.table}_dlq`, values: [row], format: "JSONEachRow" });
    await adminCh.close();
    await admin.stop();
    const roleGrants = (role: string) => statements.filter((s) => s.endsWith(`TO ${role};`)).join("\n");
    const as = async (role: string) => {
      const grants = `${secrets}/${role}.sql`;
      writeFileSync(grants, roleGrants(role));
      const e = await startChdbEndpoint({ dir, grants });
      open.push(e);
      const ch = createClient({ url: e.url, database: "e2e", log: { level: ClickHouseLogLevel.OFF } });
      const ask = (query: string) =>
        ch.query({ query, format: "JSONEachRow" }).then((r) => r.json<Record<string, unknown>>(), (err: { type?: string; message: string }) => err.type ?? err.message);
      return { ask, close: async () => (await ch.close(), await e.stop()) };
    };
    const analyst = await as("cdr_dlq_analyst");
    expect(await analyst.ask(`SELECT device_id, failure_reason FROM e2e.${n.table}_dlq`)).toEqual([{ device_id: "d1", failure_reason: "malformed_json" }]);
    expect(await analyst.ask(`SELECT count() AS c, any(device_id) AS d FROM e2e.${n.table}_dlq_summary`)).toEqual([{ c: expect.anything(), d: "d1" }]);
    expect(await analyst.ask(`SELECT original_payload FROM e2e.${n.table}_dlq`)).toBe("ACCESS_DENIED");
    expect(await analyst.ask(`SELECT * FROM e2e.${n.table}_dlq`)).toBe("ACCESS_DENIED");
    expect(await analyst.ask(`SELECT count() FROM e2e.${n.table}`)).toBe("ACCESS_DENIED");
    await analyst.close();
    const reader = await as("cdr_dlq_reader");
    expect(await reader.ask(`SELECT original_payload FROM e2e.${n.table}_dlq`)).toEqual([{ original_payload: row.original_payload }]);
    expect(await reader.ask(`SELECT count() FROM e2e.${n.table}`)).toBe("ACCESS_DENIED");
    await reader.close();
  } finally {
    await admin.stop();
    for (const e of open) await e.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    for (const d of [`${dir}-spool`, `${dir}-config`]) rmSync(d, { recursive: true, force: true });
  }
}, 120_000);
