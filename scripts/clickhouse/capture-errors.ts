/**
 * Captures how each supported ClickHouse refuses an insert, as bytes on the wire, into
 * test/fixtures/clickhouse-errors.json: the HTTP status, the X-ClickHouse-Exception-Code header and
 * the body, for inserts as the worker makes them (POST /?query=INSERT … FORMAT RowBinary, the rows
 * as the body) and in TabSeparated, where a refusal needs text to show (a value too long, a field
 * that does not parse). test/clickhouse/insert-error.test.ts feeds them through the client's own
 * parseError and through the writer's reading, so classification is tested on what servers say.
 *
 *   bash scripts/services.sh start && bun scripts/clickhouse/capture-errors.ts
 *
 * Servers: ClickHouse 18.16 (CLICKHOUSE_URL, default :8123) and the test endpoint around ClickHouse
 * 26.9's engine (CLICKHOUSE_CURRENT_URL, default :8127).
 */
import { writeFileSync } from "node:fs";

const ROOT = new URL("../..", import.meta.url).pathname;
const SERVERS = {
  "18.16": process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123",
  "26.9": process.env.CLICKHOUSE_CURRENT_URL ?? "http://127.0.0.1:8127",
};
const DB = "capture_errors";

interface Case {
  name: string;
  /** Statements that prepare the table (run as default, each must succeed). */
  setup: string[];
  insert: string;
  body: string | Uint8Array;
  settings?: Record<string, string>;
  auth?: string;
  only?: keyof typeof SERVERS;
  /** A query of the same user running while the insert is sent (started first, awaited after). */
  beside?: string;
  /**
   * Statements that lift what the case set for the whole server: 18.16 takes its total and per-user
   * memory limits from any query's settings and from then on only raises them.
   */
  after?: Array<{ query: string; settings: Record<string, string> }>;
}

/** RowBinary rows of (UInt32, String). */
const binaryRows = (values: Array<[number, string]>) =>
  Buffer.concat(values.map(([n, s]) => {
    const b = Buffer.alloc(5 + s.length);
    b.writeUInt32LE(n, 0);
    b[4] = s.length;
    b.write(s, 5, "latin1");
    return b;
  }));
const rows = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join("");
const CASES: Case[] = [
  {
    name: "unknown Enum name",
    setup: [`CREATE TABLE ${DB}.e (n UInt32, rat Enum8('3G' = 1, 'LTE_4G' = 2, '5G_NR' = 3)) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.e (n, rat) FORMAT TabSeparated`,
    body: "1\t3G\n2\tLTE_4G\n3\tVOLTE\n4\t5G_NR\n",
  },
  {
    name: "row with a missing column",
    setup: [`CREATE TABLE ${DB}.p (n UInt32, s String) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.p (n, s) FORMAT TabSeparated`,
    body: "1\n2\tb\n",
  },
  {
    name: "value too long for FixedString",
    setup: [`CREATE TABLE ${DB}.f (n UInt32, svc FixedString(8)) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.f (n, svc) FORMAT TabSeparated`,
    body: "1\tdata\n2\tstreaming-video\n3\tvoice\n",
  },
  {
    name: "CHECK constraint violated",
    setup: [`CREATE TABLE ${DB}.c (n UInt32, svc String, CONSTRAINT svc_fits CHECK length(svc) <= 8) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.c (n, svc) FORMAT RowBinary`,
    body: binaryRows([[1, "data"], [2, "streaming-video"], [3, "voice"]]),
    only: "26.9",
  },
  {
    name: "unparseable DateTime",
    setup: [`CREATE TABLE ${DB}.d (n UInt32, t DateTime('UTC')) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.d (n, t) FORMAT TabSeparated`,
    body: "1\t0000000001\n2\tyesterday\n",
    settings: { date_time_input_format: "basic" },
  },
  {
    name: "too many partitions in one block",
    setup: [`CREATE TABLE ${DB}.m (n UInt32, t DateTime('UTC')) ENGINE = MergeTree PARTITION BY toYYYYMM(t) ORDER BY n`],
    insert: `INSERT INTO ${DB}.m (n, t) FORMAT TabSeparated`,
    body: rows(101, (i) => `${i}\t${String(i * 2_700_000).padStart(10, "0")}\n`),
    only: "26.9",
  },
  {
    name: "too many parts (merges slower than inserts)",
    setup: [
      `CREATE TABLE ${DB}.tp (n UInt32) ENGINE = MergeTree ORDER BY n SETTINGS parts_to_delay_insert = 1, parts_to_throw_insert = 1`,
      `SYSTEM STOP MERGES ${DB}.tp`,
      `INSERT INTO ${DB}.tp VALUES (1)`,
    ],
    insert: `INSERT INTO ${DB}.tp (n) FORMAT TabSeparated`,
    body: "3\n",
  },
  {
    name: "insert over the memory limit",
    setup: [`CREATE TABLE ${DB}.big (n UInt32, s String) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.big (n, s) FORMAT TabSeparated`,
    body: rows(40, (i) => `${i}\t${"x".repeat(200_000)}\n`),
    settings: { max_memory_usage: "1000000" },
  },
  {
    name: "insert while the server is short of memory (total)",
    setup: [`CREATE TABLE ${DB}.mt (n UInt32, s String) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.mt (n, s) FORMAT TabSeparated`,
    body: rows(40, (i) => `${i}\t${"x".repeat(200_000)}\n`),
    settings: { max_memory_usage_for_all_queries: "1000000" },
    after: [{ query: "SELECT 1", settings: { max_memory_usage_for_all_queries: "1000000000000000" } }],
    only: "18.16",
  },
  {
    name: "insert while the user is short of memory",
    setup: [`CREATE TABLE ${DB}.mu (n UInt32, s String) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.mu (n, s) FORMAT TabSeparated`,
    body: rows(40, (i) => `${i}\t${"x".repeat(200_000)}\n`),
    settings: { max_memory_usage_for_user: "1000000" },
    after: [{ query: "SELECT 1", settings: { max_memory_usage_for_user: "1000000000000000" } }],
    only: "18.16",
  },
  {
    name: "too many simultaneous queries",
    setup: [`CREATE TABLE ${DB}.q (n UInt32) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.q (n) FORMAT TabSeparated`,
    body: "1\n",
    settings: { max_concurrent_queries_for_user: "1" },
    beside: "SELECT sleep(2)",
    only: "18.16",
  },
  {
    name: "unknown table",
    setup: [],
    insert: `INSERT INTO ${DB}.nope (n) FORMAT TabSeparated`,
    body: "1\n",
  },
  {
    name: "unknown database",
    setup: [],
    insert: `INSERT INTO nodb_${DB}.t (n) FORMAT TabSeparated`,
    body: "1\n",
  },
  {
    name: "wrong password",
    setup: [`CREATE TABLE ${DB}.a (n UInt32) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.a (n) FORMAT TabSeparated`,
    body: "1\n",
    auth: `Basic ${btoa("default:wrong-password")}`,
  },
  {
    name: "readonly user",
    setup: [`CREATE TABLE ${DB}.r (n UInt32) ENGINE = MergeTree ORDER BY n`],
    insert: `INSERT INTO ${DB}.r (n) FORMAT TabSeparated`,
    body: "1\n",
    settings: { readonly: "1" },
  },
];

async function post(url: string, query: string | null, body: string | Uint8Array, settings: Record<string, string> = {}, auth?: string) {
  const u = new URL(url);
  if (query !== null) u.searchParams.set("query", query);
  for (const [k, v] of Object.entries(settings)) u.searchParams.set(k, v);
  const res = await fetch(u, { method: "POST", body, headers: auth ? { Authorization: auth } : {} });
  return { status: res.status, exceptionCode: res.headers.get("x-clickhouse-exception-code"), body: await res.text() };
}

/** Until `query` shows in system.processes. */
async function waitRunning(url: string, query: string): Promise<void> {
  const probe = `SELECT count() FROM system.processes WHERE query = '${query}'`;
  for (let i = 0; i < 100; i++) {
    if ((await post(url, null, probe)).body.trim() !== "0") return;
    await Bun.sleep(20);
  }
  throw new Error(`"${query}" never showed in system.processes`);
}

const out: Array<{ server: string; version: string; case: string } & Awaited<ReturnType<typeof post>>> = [];
for (const [server, url] of Object.entries(SERVERS)) {
  const version = (await post(url, null, "SELECT version()")).body.trim();
  await post(url, null, `DROP DATABASE IF EXISTS ${DB}`);
  await post(url, null, `CREATE DATABASE ${DB}`);
  for (const c of CASES) {
    if (c.only && c.only !== server) continue;
    for (const sql of c.setup) {
      const r = await post(url, null, sql);
      if (r.status !== 200) throw new Error(`${server}: setup of "${c.name}" failed: ${r.body}`);
    }
    const beside = c.beside === undefined ? null : post(url, null, c.beside);
    if (beside) await waitRunning(url, c.beside!);
    const r = await post(url, c.insert, c.body, c.settings, c.auth);
    await beside;
    for (const a of c.after ?? []) await post(url, null, a.query, a.settings);
    if (r.status === 200) throw new Error(`${server}: "${c.name}" was not refused`);
    out.push({ server, version, case: c.name, ...r });
    console.log(`${server} ${c.name}: HTTP ${r.status}, code ${r.exceptionCode ?? "(no header)"}: ${r.body.split("\n")[0]!.slice(0, 100)}`);
  }
  await post(url, null, `DROP DATABASE IF EXISTS ${DB}`);
}
writeFileSync(`${ROOT}/test/fixtures/clickhouse-errors.json`, JSON.stringify(out, null, 2) + "\n");
console.log(`wrote ${out.length} answers to test/fixtures/clickhouse-errors.json`);
