// The test endpoint around ClickHouse 26.9's engine (scripts/clickhouse/chdb-http.py) answers as
// ClickHouse's HTTP handler does, for the part of the interface the worker and its tests use:
// status codes from exceptionCodeToHTTPStatus, the exception-code header, the server's text
// suffix, settings per request, keep-alive, concurrent requests, and bodies cut off mid-stream.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "node:net";
import { CLICKHOUSE_CURRENT_URL, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const url = CLICKHOUSE_CURRENT_URL;
const table = `e2e.${uniqueName("chdbhttp").replace(/\W/g, "_")}`;
const post = async (sql: string, params: Record<string, string> = {}, body?: string, headers: Record<string, string> = {}) => {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  if (body !== undefined) u.searchParams.set("query", sql);
  const r = await fetch(u, { method: "POST", body: body ?? sql, headers });
  return { status: r.status, code: r.headers.get("x-clickhouse-exception-code"), headers: r.headers, text: await r.text() };
};
afterAll(async () => {
  await post(`DROP TABLE IF EXISTS ${table}`);
});

/** Sends raw bytes on one TCP connection; resolves with everything read until `done(text)` or close. */
function raw(chunks: string[], done: (text: string) => boolean, closeAfterSend = false): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let got = "";
    const s = connect(Number(port), hostname, () => {
      for (const c of chunks) s.write(c);
      if (closeAfterSend) s.end();
    });
    s.on("data", (d) => {
      got += d.toString();
      if (done(got)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on("close", () => resolve(got));
    s.on("error", reject);
  });
}

test("ping, version, and a query's response headers", async () => {
  expect(await (await fetch(`${url}/ping`)).text()).toBe("Ok.\n");
  const r = await post("SELECT version()");
  expect([r.status, r.text]).toEqual([200, expect.stringMatching(/^26\.9\.\d+\.\d+\n$/)]);
  expect(r.headers.get("x-clickhouse-format")).toBe("TabSeparated");
  expect(r.headers.get("x-clickhouse-query-id")).toBeTruthy();
  expect(JSON.parse(r.headers.get("x-clickhouse-summary")!)).toHaveProperty("read_rows");
});

test.each([
  ["an unknown table", "SELECT * FROM e2e.no_such_table_here", {}, 404, 60, "UNKNOWN_TABLE"],
  ["a syntax error", "SELEC 1", {}, 400, 62, "SYNTAX_ERROR"],
  ["an unknown setting", "SELECT 1", { no_such_setting: "1" }, 404, 115, "UNKNOWN_SETTING"],
  ["a wrong password", "SELECT 1", { password: "wrong" }, 403, 516, "AUTHENTICATION_FAILED"],
  ["a write in readonly mode", "CREATE DATABASE IF NOT EXISTS e2e", { readonly: "1" }, 500, 164, "READONLY"],
  ["an exception the mapping does not name", "SELECT throwIf(1)", {}, 500, 395, "FUNCTION_THROW_IF_VALUE_IS_NON_ZERO"],
] as const)("%s: the server's status, exception-code header and text suffix", async (_n, sql, params, status, code, type) => {
  const r = await post(sql, params);
  expect([r.status, r.code]).toEqual([status, String(code)]);
  expect(r.text).toMatch(new RegExp(`^Code: ${code}\\. DB::Exception: [\\s\\S]*\\(${type}\\) \\(version 26\\.9\\.[\\d.]+\\)\\n$`));
});

test("settings and database apply to their own request only", async () => {
  const setting = "SELECT value FROM system.settings WHERE name = 'max_partitions_per_insert_block'";
  expect((await post(setting, { max_partitions_per_insert_block: "7" })).text).toBe("7\n");
  expect((await post(setting)).text).toBe("100\n");
  expect((await post("SELECT currentDatabase()", { database: "system" })).text).toBe("system\n");
  expect((await post("SELECT currentDatabase()")).text).toBe("default\n");
  expect((await post("SELECT {n:UInt8} + 1", { param_n: "41" })).text).toBe("42\n");
  // A refused request leaves no setting behind either.
  await post("SELECT throwIf(1)", { max_partitions_per_insert_block: "9" });
  expect((await post(setting)).text).toBe("100\n");
});

test("inserts: the body is the data; 40 concurrent ones all land", async () => {
  expect((await post(`CREATE TABLE IF NOT EXISTS ${table} (n UInt32, s String) ENGINE = MergeTree ORDER BY n`)).status).toBe(200);
  const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => post(`INSERT INTO ${table} (n, s) FORMAT TabSeparated`, {}, `${i}\tx${i}\n`)));
  expect(rs.map((r) => r.status)).toEqual(rs.map(() => 200));
  expect((await post(`SELECT count(), uniqExact(n) FROM ${table}`)).text).toBe("40\t40\n");
});

test("keep-alive: two requests on one connection, two answers", async () => {
  const req = (sql: string) => `GET /?query=${encodeURIComponent(sql)} HTTP/1.1\r\nHost: x\r\n\r\n`;
  const text = await raw([req("SELECT 1"), req("SELECT 2")], (t) => (t.match(/HTTP\/1\.1 200/g) ?? []).length === 2 && t.endsWith("2\n"));
  expect(text.match(/HTTP\/1\.1 200 OK/g)?.length).toBe(2);
  expect(text).toContain("Keep-Alive: timeout=10");
});

test("a chunked insert cut off mid-stream stores nothing, and the endpoint goes on serving", async () => {
  await post(`CREATE TABLE IF NOT EXISTS ${table} (n UInt32, s String) ENGINE = MergeTree ORDER BY n`);
  const before = (await post(`SELECT count() FROM ${table}`)).text;
  const head = `POST /?query=${encodeURIComponent(`INSERT INTO ${table} (n, s) FORMAT TabSeparated`)} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`;
  const chunk = "1000\tcut\n1001\tcut\n";
  // One whole chunk, then a chunk that announces more bytes than arrive before the connection ends.
  const answer = await raw([head, `${chunk.length.toString(16)}\r\n${chunk}\r\n`, `40\r\n1002\tcu`], () => false, true);
  expect(answer).toBe("");
  expect((await post(`SELECT count() FROM ${table}`)).text).toBe(before);
  expect((await post("SELECT 1")).text).toBe("1\n");
});

test("binary insert data is stored byte for byte, newline bytes and all, as the server stores its body; a refusal's text names no file", async () => {
  const t = `e2e.${uniqueName("chdbbin").replace(/\W/g, "_")}`;
  await post(`CREATE TABLE ${t} (a UInt32, b UInt32) ENGINE = MergeTree ORDER BY a`);
  try {
    // 0x0a0a0000 is 00 00 0a 0a little-endian: the engine's query text path lost those two bytes.
    const values = [[0x0a0a0000, 5], [0x0a0a, 0x0a], [0x0d0a0d0a, 0x20202020]];
    const body = new Uint8Array(values.length * 8);
    const view = new DataView(body.buffer);
    values.forEach(([a, b], i) => (view.setUint32(i * 8, a!, true), view.setUint32(i * 8 + 4, b!, true)));
    const u = new URL(url);
    u.searchParams.set("query", `INSERT INTO ${t} (a, b) FORMAT RowBinary`);
    expect((await fetch(u, { method: "POST", body })).status).toBe(200);
    expect((await post(`SELECT a, b FROM ${t} ORDER BY a`)).text).toBe(values.map(([a, b]) => `${a}\t${b}\n`).sort((x, y) => Number(x.split("\t")[0]) - Number(y.split("\t")[0])).join(""));
    const short = await fetch(u, { method: "POST", body: body.subarray(0, 6) });
    const text = await short.text();
    expect([short.status, short.headers.get("x-clickhouse-exception-code")]).toEqual([500, "33"]);
    expect(text).toContain("Cannot read all data");
    expect(text).not.toContain("file/uri");
  } finally {
    await post(`DROP TABLE IF EXISTS ${t}`);
  }
});
