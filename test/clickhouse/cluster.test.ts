// `migrate --cluster` on two real ClickHouse 18.16 replicas of one shard with ZooKeeper
// (scripts/cluster/clickhouse-replicas.sh), and the worker writing to the Distributed table through
// both endpoints while one replica is stopped and comes back: both end up with every row.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { createClient } from "@clickhouse/client";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { ClickHouseInsertError } from "../../src/clickhouse/insert-error.ts";
import { ddlStatements, dlqStatements, migrate } from "../../src/clickhouse/migrate.ts";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { productionProfile } from "../support/profile.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { dlqRow } from "../../src/dlq-table/row.ts";
import { ClickHouseDlqStore } from "../../src/dlq-table/store.ts";
import type { Message } from "../../src/kafka/message.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { chdb } from "../support/chdb.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { ROOT, run, uniqueName, waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();
const SCRIPT = `${ROOT}/scripts/cluster/clickhouse-replicas.sh`;
const REPLICAS = ["http://127.0.0.1:8124", "http://127.0.0.1:8125"];
const DB = uniqueName("cluster").replace(/\W/g, "_");
const replica = (url: string) => createClient({ url, request_timeout: 30_000 });
const count = async (url: string, q: string) => {
  const ch = replica(url);
  try {
    return Number((await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);
  } finally {
    await ch.close();
  }
};

beforeAll(async () => {
  await run(["bash", SCRIPT, "start"]);
}, 240_000); // above the start script's own bounds (60 s for ZooKeeper and for each replica), so its error names the log
const cleanupDatabases: string[] = [];
const cleanupFiles: string[] = [];
afterAll(async () => {
  for (const f of cleanupFiles) rmSync(f, { force: true });
  const ch = replica(REPLICAS[1]!);
  for (const db of [DB, ...cleanupDatabases]) await ch.command({ query: `DROP DATABASE IF EXISTS ${db} ON CLUSTER cdr_cluster` }).catch(() => {});
  await ch.close();
  await run(["bash", SCRIPT, "stop"]);
});

test("migrate --cluster: upgrades tables of the older DDL (no provenance) on every replica, local then Distributed; twice without harm", async () => {
  // The tables as a release before the Kafka provenance columns made them.
  const ch0 = replica(REPLICAS[0]!);
  for (const q of ddlStatements(DB, "cdr", "cdr_cluster").filter((q) => !q.includes("_offsets"))) await ch0.command({ query: q.replace(/,\s*kafka_partition[^\n]*\n\s*kafka_offset[^\n]*/, "") });
  await ch0.close();
  expect(await count(REPLICAS[1]!, `SELECT count() AS c FROM system.columns WHERE database = '${DB}' AND name LIKE 'kafka_%'`)).toBe(0);
  const env = { ...process.env, CLICKHOUSE_URL: REPLICAS[0]!, CLICKHOUSE_DATABASE: DB, CLICKHOUSE_TABLE: "cdr" };
  const added = [];
  for (let i = 0; i < 2; i++) {
    const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "migrate", "--cluster", "cdr_cluster"], { env, stdout: "pipe", stderr: "pipe" });
    expect({ exit: p.exitCode, stderr: p.stderr.toString() }).toEqual({ exit: 0, stderr: "" });
    const out = JSON.parse(p.stdout.toString());
    expect(out).toMatchObject({ migrated: `${DB}.cdr`, cluster: "cdr_cluster" });
    added.push(out.columns_added);
  }
  expect(added).toEqual([[`${DB}.cdr_local.kafka_partition`, `${DB}.cdr_local.kafka_offset`, `${DB}.cdr.kafka_partition`, `${DB}.cdr.kafka_offset`], []]);
  for (const url of REPLICAS)
    expect(await count(url, `SELECT count() AS c FROM system.columns WHERE database = '${DB}' AND table IN ('cdr', 'cdr_local') AND name LIKE 'kafka_%'`)).toBe(4);
  for (const url of REPLICAS) {
    const ch = replica(url);
    const rows = await (await ch.query({ query: `SELECT name, engine FROM system.tables WHERE database = '${DB}' ORDER BY name`, format: "JSONEachRow" })).json();
    await ch.close();
    expect(rows).toEqual([
      { name: "cdr", engine: "Distributed" },
      { name: "cdr_dlq", engine: "Distributed" },
      { name: "cdr_dlq_local", engine: "ReplicatedMergeTree" },
      { name: "cdr_dlq_summary", engine: "View" },
      { name: "cdr_local", engine: "ReplicatedReplacingMergeTree" },
      { name: "cdr_offsets", engine: "Distributed" },
      { name: "cdr_offsets_local", engine: "ReplicatedMergeTree" },
      { name: "cdr_offsets_mv", engine: "MaterializedView" },
    ]);
  }
}, 60_000);

test("the cluster DDL parses on the current engine (ClickHouse 26.9's formatQuery; it has no ZooKeeper to run it)", async () => {
  const statements = [...ddlStatements(DB, "cdr", "cdr_cluster"), ...dlqStatements(DB, "cdr", "cdr_cluster")];
  const { results } = await chdb(`${ROOT}/.local/tmp/${uniqueName("fq")}`, statements.map((s) => ({ sql: `SELECT formatQuery('${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}')` })));
  expect(results.map((r) => r.ok)).toEqual(statements.map(() => true));
});

test("the worker writes to the Distributed table through both replicas; one stopped mid-stream, back later: both hold every row", async () => {
  const n = await names("clusterw");
  const w = await startWorker(workerEnv(n, { CLICKHOUSE_URL: REPLICAS.join(","), CLICKHOUSE_DATABASE: DB, CLICKHOUSE_TABLE: "cdr", CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0" }));
  const p = new Producer(props);
  try {
    const send = async (from: number, k: number) => {
      for (let i = from; i < from + k; i++) await p.produce(n.raw, toJson(withFields({ raw_id: `cl-${i}` })), { partition: i % 3 });
    };
    await send(0, 300);
    await statsWhen(w, (s) => s.total_clickhouse === 300, 30_000, "first rows");
    await run(["bash", "-c", `kill -9 $(cat ${ROOT}/.local/cluster/r1/clickhouse.pid)`]);
    await waitFor(async () => ((await fetch(`${REPLICAS[0]}/ping`).catch(() => null)) === null ? true : undefined), 20_000, "r1 down");
    await send(300, 300);
    const s = await statsWhen(w, (s) => s.total_clickhouse === 600, 30_000, "rows while r1 is down");
    expect(s.total_dlq).toBe(0);
    await run(["bash", SCRIPT, "start"]);
    for (const url of REPLICAS) {
      await waitFor(async () => {
        const ch = replica(url);
        await ch.command({ query: `SYSTEM SYNC REPLICA ${DB}.cdr_local` }).catch(() => {});
        await ch.close();
        return (await count(url, `SELECT uniqExact(raw_id) AS c FROM ${DB}.cdr_local WHERE raw_id LIKE 'cl-%'`)) === 600 ? true : undefined;
      }, 60_000, `every row on ${url}`);
    }
    expect(await w.stop()).toBe(0);
  } finally {
    p.close();
    w.proc.kill("SIGKILL");
  }
}, 180_000);

// Through a Distributed table (exactly-once sends insert_distributed_sync=1) each shard's part of an
// insert runs as a query of its own, under its own query_id, with the worker's as initial_query_id.
// Ending a lost insert must end those too: the initiator's KILL returns while a sub-insert still
// writes the block it was sent, and rows stored after the lost-answer read would be sent again.
test("a lost insert through the Distributed table: ending it ends its sub-inserts on every replica", async () => {
  const sink = `${DB}.slow_sink`;
  const ch0 = replica(REPLICAS[0]!);
  try {
    // Each sub-insert into cdr_local takes 2.8 s: a view that sleeps 0.2 s a row, 14 rows.
    await ch0.command({ query: `CREATE TABLE IF NOT EXISTS ${sink} ON CLUSTER cdr_cluster (x UInt8) ENGINE = MergeTree ORDER BY x` });
    await ch0.command({
      query: `CREATE MATERIALIZED VIEW IF NOT EXISTS ${DB}.slow ON CLUSTER cdr_cluster TO ${sink} AS SELECT sleepEachRow(0.2) AS x FROM ${DB}.cdr_local`,
    });
  } finally {
    await ch0.close();
  }
  // The shard's part goes over the network even to the local replica, as it does to another shard's.
  const endpoints = REPLICAS.map((url, i) => ({
    name: `r${i}`,
    client: createClient({ url, request_timeout: 2_000, clickhouse_settings: { prefer_localhost_replica: 0 } }),
  }));
  const w = new ClickHouseWriter(endpoints, DB, "cdr", { requestTimeoutMs: 2_000, syncDistributed: true });
  const base = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
  if (!base.ok) throw new Error("fixture record must be valid");
  const b = new RowBinaryBuffer();
  for (let i = 0; i < 14; i++) b.add({ ...base.row, cdr_id: crypto.randomUUID() }, 100, 0, i);
  try {
    const err = await w.insert(b.bytes().slice(), 14).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ClickHouseInsertError);
    const attempts = (err as ClickHouseInsertError).attempts;
    expect(attempts.length).toBe(1);
    await w.endInserts(attempts);
    const which = `initial_query_id = '${attempts[0]!.queryId}'`;
    const running = await Promise.all(REPLICAS.map((url) => count(url, `SELECT count() AS c FROM system.processes WHERE ${which}`)));
    expect(running).toEqual([0, 0]);
  } finally {
    for (const e of endpoints) await e.client.close();
  }
}, 60_000);

test("the DLQ table on a cluster: what the filler's node took through its Distributed table, it reads as the position at once", async () => {
  // The tables of the migrate --cluster test above, made anew if it did not run first.
  const ch0 = replica(REPLICAS[0]!);
  try {
    for (const q of [...ddlStatements(DB, "cdr", "cdr_cluster"), ...dlqStatements(DB, "cdr", "cdr_cluster")].filter((q) => !q.includes("MATERIALIZED VIEW")))
      await ch0.command({ query: q });
  } finally {
    await ch0.close();
  }
  const [a, b] = REPLICAS.map((url) => replica(url));
  // The filler talks to one node (the first endpoint): there it inserts and reads its position.
  const store = new ClickHouseDlqStore(b!, DB, "cdr");
  const value = new TextEncoder().encode(encodeEnvelope({ reason: "malformed_json", field: null, payload: "x", payloadIsObject: false }, new Date(), "w"));
  const at = (offset: number): Message => ({ topic: "dlq", partition: 3, offset, timestamp: -1, value, key: null, headers: [] });
  try {
    // Each insert's rows read back at once, 20 times: never a replica behind.
    for (let i = 0; i < 20; i++) {
      await store.insert([dlqRow(at(2 * i), { storedAt: Date.now() / 1000 }), dlqRow(at(2 * i + 1), { storedAt: Date.now() / 1000 })], `cdr-dlq-fill:cluster:${DB}:${i}`, 10_000);
      expect(await store.positions([3])).toEqual(new Map([[3, 2 * i + 1]]));
    }
    // As billing counts: count() without FINAL beside the distinct (DLQ partition, DLQ offset).
    const rs = await b!.query({ query: `SELECT count() AS c, uniqExact(dlq_partition, dlq_offset) AS u FROM ${DB}.cdr_dlq`, format: "JSONEachRow" });
    expect((await rs.json<{ c: string; u: string }>()).map((r) => [Number(r.c), Number(r.u)])).toEqual([[40, 40]]);
  } finally {
    await a!.close();
    await b!.close();
  }
}, 60_000);

/** The SQL blocks of docs/upgrade.md's "From one server to a cluster", for `database`. */
function upgradeSteps(database: string): string[][] {
  const doc = readFileSync(`${ROOT}/docs/upgrade.md`, "utf8");
  const section = doc.slice(doc.indexOf("## From one server to a cluster"));
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) =>
    m[1]!.replaceAll("telecom.", `${database}.`).split(";").map((q) => q.trim()).filter(Boolean),
  );
}

const migrateCli = (database: string, ...args: string[]) => {
  const env = { ...process.env, CLICKHOUSE_URL: REPLICAS[0]!, CLICKHOUSE_DATABASE: database, CLICKHOUSE_TABLE: "cdr" };
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "migrate", ...args], { env, stdout: "pipe", stderr: "pipe" });
  return { exit: p.exitCode, stderr: p.stderr.toString() };
};

test("from one server to a cluster: migrate --cluster over a server's table stops with one line; docs/upgrade.md's steps move every row, and the workers go on, each record once", async () => {
  const db = uniqueName("single").replace(/\W/g, "_");
  cleanupDatabases.push(db);
  const ch0 = replica(REPLICAS[0]!);
  try {
    await migrate(ch0, db, "cdr");
  } finally {
    await ch0.close();
  }
  const n = await names("single");
  const env = (url: string) => workerEnv(n, { CLICKHOUSE_URL: url, CLICKHOUSE_DATABASE: db, CLICKHOUSE_TABLE: "cdr" });
  const first = await produceSynthetic(n.raw, 300, 0, 501);
  let w = await startWorker(env(REPLICAS[0]!));
  await statsWhen(w, (s) => s.total_clickhouse === first.valid && s.in_flight_buffer === 0, 30_000, "stored on the one server");
  expect(await w.stop()).toBe(0);

  const refused = migrateCli(db, "--cluster", "cdr_cluster");
  expect(refused.exit).toBe(1);
  expect(refused.stderr.trim().split("\n")).toHaveLength(1);
  expect(refused.stderr).toContain(`${db}.cdr is a single server's table (ReplacingMergeTree)`);
  expect(refused.stderr).toContain("docs/upgrade.md#from-one-server-to-a-cluster");
  expect(await count(REPLICAS[0]!, `SELECT count() AS c FROM system.tables WHERE database = '${db}' AND name LIKE '%_local'`)).toBe(0);

  const [aside, copy] = upgradeSteps(db);
  const run0 = async (queries: string[]) => {
    const ch = replica(REPLICAS[0]!);
    try {
      for (const query of queries) await ch.command({ query });
    } finally {
      await ch.close();
    }
  };
  await run0(aside!);
  expect(migrateCli(db, "--cluster", "cdr_cluster")).toEqual({ exit: 0, stderr: "" });
  await run0(copy!);
  for (const url of REPLICAS) {
    const ch = replica(url);
    // The offsets reach a replica by replication too (the view runs where the insert went).
    for (const t of ["cdr_local", "cdr_offsets_local"]) await ch.command({ query: `SYSTEM SYNC REPLICA ${db}.${t}` }).catch(() => {});
    await ch.close();
    expect(await count(url, `SELECT count() AS c FROM ${db}.cdr_local`)).toBe(first.valid);
    expect(await count(url, `SELECT count() AS c FROM ${db}.cdr_offsets_local`)).toBe(first.valid);
  }

  // The workers go on from their group's commits through both nodes: the moved records are not read again.
  const second = await produceSynthetic(n.raw, 300, 0, 502);
  w = await startWorker(env(REPLICAS.join(",")));
  try {
    await statsWhen(w, (s) => s.total_clickhouse === second.valid && s.in_flight_buffer === 0, 30_000, "the new records stored on the cluster");
    expect(await w.stop()).toBe(0);
  } finally {
    w.proc.kill("SIGKILL");
  }
  const total = first.valid + second.valid;
  expect(await count(REPLICAS[1]!, `SELECT count() AS c FROM ${db}.cdr`)).toBe(total);
  expect(await count(REPLICAS[1]!, `SELECT uniqExact(cdr_id) AS c FROM ${db}.cdr`)).toBe(total);
  // The offsets counted as billing would, beside the distinct ones: an offset copied twice fails one.
  expect(await count(REPLICAS[1]!, `SELECT count() AS c FROM ${db}.cdr_offsets`)).toBe(total);
  expect(await count(REPLICAS[1]!, `SELECT uniqExact(kafka_partition, kafka_offset) AS c FROM ${db}.cdr_offsets`)).toBe(total);
}, 180_000);

test("the first of two endpoints down while the second lacks the worker's user: under the production profile the worker waits, naming code 192, and goes on; nothing dead-lettered, each record once", async () => {
  const db = uniqueName("cluser").replace(/\W/g, "_");
  cleanupDatabases.push(db);
  const ch0 = replica(REPLICAS[0]!);
  try {
    await migrate(ch0, db, "cdr", "cdr_cluster");
  } finally {
    await ch0.close();
  }
  // The worker's user on r1 alone, as a migrate Job that reached the first endpoint only left it.
  const user = uniqueName("ops").replace(/\W/g, "_");
  const usersD = `${ROOT}/.local/cluster/r1/users.d`;
  mkdirSync(usersD, { recursive: true });
  writeFileSync(`${usersD}/${user}.xml`, `<?xml version="1.0"?>\n<yandex><users><${user}><password>ops-secret</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></${user}></users></yandex>\n`);
  cleanupFiles.push(`${usersD}/${user}.xml`);
  await waitFor(async () => ((await fetch(`${REPLICAS[0]}/?user=${user}&password=ops-secret`, { method: "POST", body: "SELECT 1" })).ok ? true : undefined), 30_000, "r1 knows the user");
  const n = await names("cluser");
  const w = await startWorker(workerEnv(n, { ...productionProfile(), CLICKHOUSE_URL: REPLICAS.join(","), CLICKHOUSE_DATABASE: db, CLICKHOUSE_TABLE: "cdr", CLICKHOUSE_USER: user, CLICKHOUSE_PASSWORD: "ops-secret", CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0" }));
  try {
    const first = await produceSynthetic(n.raw, 200, 0, 601);
    await statsWhen(w, (s) => s.total_clickhouse === first.valid, 30_000, "stored through r1");
    await run(["bash", "-c", `kill -9 $(cat ${ROOT}/.local/cluster/r1/clickhouse.pid)`]);
    await waitFor(async () => ((await fetch(`${REPLICAS[0]}/ping`).catch(() => null)) === null ? true : undefined), 20_000, "r1 down");
    const second = await produceSynthetic(n.raw, 200, 0, 602);
    const reasons = await waitFor(async () => {
      const r = ((await (await fetch(`${w.statsUrl}/readyz`)).json()) as { reasons: string[] }).reasons.join(" ");
      return r.includes("refuses the worker: code 192") ? r : undefined;
    }, 30_000, "/readyz naming r2's refusal");
    expect(reasons).toContain("127.0.0.1:8125");
    await Bun.sleep(5_000);
    expect((await w.stats()).total_dlq).toBe(0);
    await run(["bash", SCRIPT, "start"]);
    const s = await statsWhen(w, (s) => s.total_clickhouse === first.valid + second.valid && s.in_flight_buffer === 0, 60_000, "every record stored once r1 is back");
    expect(s.total_dlq).toBe(0);
    expect(await w.stop()).toBe(0);
    const total = first.valid + second.valid;
    expect(await count(REPLICAS[0]!, `SELECT count() AS c FROM ${db}.cdr`)).toBe(total);
    expect(await count(REPLICAS[0]!, `SELECT uniqExact(cdr_id) AS c FROM ${db}.cdr`)).toBe(total);
    expect(await count(REPLICAS[0]!, `SELECT count() AS c FROM ${db}.cdr_offsets`)).toBe(total);
    expect(await count(REPLICAS[0]!, `SELECT uniqExact(kafka_partition, kafka_offset) AS c FROM ${db}.cdr_offsets`)).toBe(total);
  } finally {
    w.proc.kill("SIGKILL");
  }
}, 180_000);
