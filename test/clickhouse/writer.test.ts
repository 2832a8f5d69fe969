// The writer against real sockets: a row the 26.9 engine refuses (a CHECK constraint) is a data
// error naming row and column; a body over 18.16's memory limit is a shape error (split, not
// resent); each server gets only the settings its version knows; a connection the peer resets is
// transient.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { ClickHouseInsertError } from "../../src/clickhouse/insert-error.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { insertSettings } from "../../src/clickhouse/server-version.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { CLICKHOUSE_SERVERS, uniqueName } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";

setDefaultTimeout(60_000);

const table = uniqueName("writer").replace(/\W/g, "_");
const cfg = (url: string) => ({ url, user: "default", password: "", database: "default", table, requestTimeoutMs: 5000 });
const clients = CLICKHOUSE_SERVERS.map((s) => createClickHouse(cfg(s.url), "default"));
afterAll(async () => {
  for (const ch of clients) {
    for (const t of [table, `${table}_check`])
      for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
    await ch.close();
  }
});

const base = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
if (!base.ok) throw new Error("fixture record must be valid");
/** A RowBinary body of one row per service name. */
const body = (...services: string[]) => {
  const b = new RowBinaryBuffer();
  for (const s of services) b.add({ ...base.row, service_type: s }, 100);
  return b.bytes().slice();
};

test("ClickHouse 26.9 engine: a row a CHECK constraint refuses is a data error with its row and column, not retryable", async () => {
  const i = CLICKHOUSE_SERVERS.findIndex((s) => s.version.test("26.9."));
  const ch = clients[i]!;
  await migrate(ch, "e2e", `${table}_check`);
  await ch.command({ query: `ALTER TABLE e2e.${table}_check ADD CONSTRAINT svc_fits CHECK length(service_type) <= 8` });
  const w = new ClickHouseWriter(ch, "e2e", `${table}_check`);
  await w.insert(body("voice", "data"), 2);
  const e = await w.insert(body("voice", "streaming-video", "data"), 3).then(() => null, (e: unknown) => e);
  expect(e).toBeInstanceOf(ClickHouseInsertError);
  const err = e as ClickHouseInsertError;
  expect([err.kind, err.retryable, err.row, err.column, err.serverCode]).toEqual(["data", false, 2, "service_type", 469]);
});

test("ClickHouse 18.16: a body over the profile's memory limit is a shape error (halves may pass), not retryable", async () => {
  const i = CLICKHOUSE_SERVERS.findIndex((s) => s.version.test("18.16."));
  await migrate(clients[i]!, "e2e", table);
  // The `limited` user's profile (scripts/clickhouse/users.xml): 40 MB a query.
  const limited = createClickHouse({ ...cfg(CLICKHOUSE_SERVERS[i]!.url), user: "limited" }, "default");
  try {
    const w = new ClickHouseWriter(limited, "e2e", table);
    await w.insert(body("voice"), 1);
    const e = await w.insert(body("voice", "x".repeat(4 << 20)), 2).then(() => null, (e: unknown) => e);
    expect(e).toBeInstanceOf(ClickHouseInsertError);
    const err = e as ClickHouseInsertError;
    expect([err.kind, err.retryable, err.serverCode]).toEqual(["shape", false, 241]);
  } finally {
    await limited.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: the server takes the writer's insert settings for its version: async_insert=0 where it has the setting, no progress headers", async (_n, server, i) => {
  const ch = clients[i]!;
  await migrate(ch, "e2e", table);
  const w = new ClickHouseWriter(ch, "e2e", table);
  await w.insert(body("voice"), 1);
  // What the server itself reports for a query sent with the writer's settings.
  const settings = insertSettings(w.endpoints[0]!.version!);
  const rs = await ch.query({ query: "SELECT name, value FROM system.settings WHERE name IN ('async_insert', 'max_threads', 'send_progress_in_http_headers')", format: "JSONEachRow", clickhouse_settings: settings });
  const seen = Object.fromEntries((await rs.json<{ name: string; value: string }>()).map((r) => [r.name, r.value]));
  expect(seen.max_threads).toBeDefined(); // the query itself answered
  expect(seen.send_progress_in_http_headers).toBe("0");
  if (server.version.test("18.16.")) expect(seen.async_insert).toBeUndefined(); // 18.16 has no such setting
  else expect(seen.async_insert).toBe("0");
});

test("a socket reset is classified as transient (retryable)", async () => {
  // A peer that accepts and resets every connection, as a restarting server or a proxy would.
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open(s) { s.terminate(); }, data() {} } });
  const client = createClickHouse(cfg(`http://127.0.0.1:${listener.port}`), "default");
  try {
    const e = await new ClickHouseWriter(client, "e2e", table).insert(body("voice"), 1).then(() => null, (e: unknown) => e);
    expect(e).toBeInstanceOf(ClickHouseInsertError);
    expect([(e as ClickHouseInsertError).kind, (e as ClickHouseInsertError).retryable, (e as ClickHouseInsertError).serverCode]).toEqual(["transient", true, null]);
  } finally {
    listener.stop(true);
    await client.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: health is the writer's: inserts failing from an insert no endpoint took until one is taken", async (_n, server, i) => {
  await migrate(clients[i]!, "e2e", table);
  const proxy = TcpProxy.inFrontOf(server.url);
  const client = createClickHouse(cfg(proxy.url), "default");
  try {
    const w = new ClickHouseWriter(client, "e2e", table);
    expect(w.health).toEqual({ reachable: true, inserting: true, refusal: null });
    proxy.down();
    await expect(w.insert(body("voice"), 1)).rejects.toBeInstanceOf(ClickHouseInsertError);
    expect(w.health).toEqual({ reachable: false, inserting: false, refusal: null });
    proxy.up();
    await w.insert(body("voice"), 1);
    expect(w.health).toEqual({ reachable: true, inserting: true, refusal: null });
  } finally {
    proxy.down();
    await client.close();
  }
});

// Any ClickHouse user could run a long query whose id starts with `cdr-worker:` and hold every replay
// check up to its 120 s wait. The check waits only for the workers' own user's inserts. (18.16: the
// 26.9 test endpoint has one user and runs one statement at a time.)
test("ClickHouse 18.16: another user's long query with a cdr-worker: id does not hold up the wait for running inserts", async () => {
  const url = CLICKHOUSE_SERVERS[0]!.url;
  const other = createClickHouse({ ...cfg(url), user: "limited" }, "default");
  const writer = new ClickHouseWriter([{ name: "a", client: clients[0]! }], "default", table, { instance: "w", user: "default" });
  const queryId = `cdr-worker:not-a-worker:${Date.now()}`;
  const slow = other.query({ query: "SELECT sleep(3)", query_id: queryId, format: "TabSeparated" }).then((r) => r.text());
  try {
    await Bun.sleep(300); // the other user's query is running
    const running = await clients[0]!.query({ query: `SELECT count() FROM system.processes WHERE query_id = '${queryId}'`, format: "TabSeparated" });
    expect((await running.text()).trim()).toBe("1");
    const t0 = performance.now();
    await writer.insertsEnded();
    expect(performance.now() - t0).toBeLessThan(1_500);
  } finally {
    await slow.catch(() => {});
    await other.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, i] as const))("%s: the replay check reads the offsets table, each partition from its own offset and time", async (_n, i) => {
  const ch = clients[i]!;
  const t = `${table}_replay`;
  await migrate(ch, "e2e", t);
  try {
    const now = Math.floor(Date.now() / 1000);
    // Partition 0: its owner committed at 100 an hour ago; a row at 120 from three hours ago is an
    // older incarnation's. Partition 1: committed at 5 three hours ago, so that row is its own.
    const rows = [
      [0, 99, now - 60], [0, 100, now - 60], [0, 120, now - 3 * 3600], [0, 121, now - 60],
      [1, 4, now - 3 * 3600], [1, 5, now - 3 * 3600 + 120], [1, 7, now - 60],
    ];
    const values = rows.map(([p, o, at]) => `(${p}, ${o}, ${at}, '${crypto.randomUUID()}', ${at})`);
    await ch.command({ query: `INSERT INTO e2e.${t} (kafka_partition, kafka_offset, ingested_at, cdr_id, session_start_time) VALUES ${values.join(", ")}` });
    // Only the offsets table answers: the table itself is gone.
    await ch.command({ query: `DROP TABLE e2e.${t}_offsets_mv` });
    await ch.command({ query: `DROP TABLE e2e.${t}` });
    const w = new ClickHouseWriter(ch, "e2e", t, { requestTimeoutMs: 5000 });
    const found = await w.storedOffsets([
      { partition: 0, from: 100, since: (now - 3600) * 1000 },
      { partition: 1, from: 5, since: (now - 3 * 3600) * 1000 },
    ]);
    expect([...found].sort(([a], [b]) => a - b).map(([p, o]) => [p, [...o].sort((x, y) => x - y)])).toEqual([[0, [100, 121]], [1, [5, 7]]]);
  } finally {
    for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
  }
});

// Regression (the delivery simulation's failover-resend): an insert whose answer was lost after the
// server stored it went on to the next endpoint at once; two entry points of one table stored it twice.
test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: an answer lost at the first endpoint stops the endpoint loop: thrown as maybe stored, never sent to the next", async (_n, server, i) => {
  const t = `${table}_failover`;
  await migrate(clients[i]!, "e2e", t);
  const a = TcpProxy.inFrontOf(server.url), b = TcpProxy.inFrontOf(server.url);
  const endpoints = [a, b].map((p, k) => ({ name: `e${k}`, client: createClickHouse(cfg(p.url), "default") }));
  try {
    const w = new ClickHouseWriter(endpoints, "e2e", t);
    await w.insert(body("warmup"), 1); // learns a's version, so the next insert's first request is the insert
    a.loseAnswers(() => "reset");
    // Rows with provenance: the offsets table (a plain MergeTree) counts each stored copy, merged or not.
    const b2 = new RowBinaryBuffer();
    for (const o of [1, 2]) b2.add({ ...base.row, cdr_id: crypto.randomUUID() }, 100, 0, o);
    const e = await w.insert(b2.bytes().slice(), 2).then(() => null, (e: unknown) => e);
    expect(e).toBeInstanceOf(ClickHouseInsertError);
    const err = e as ClickHouseInsertError;
    expect([err.mayHaveStored, err.attempts.map((x) => x.endpoint)]).toEqual([true, [0]]);
    const rows = await (await clients[i]!.query({ query: `SELECT count() AS c FROM e2e.${t}_offsets WHERE kafka_offset IN (1, 2)`, format: "JSONEachRow" })).json<{ c: string }>();
    expect(Number(rows[0]!.c)).toBe(2); // stored once, through a; b got nothing
    // The next insert goes to the next endpoint first.
    await w.insert(body("sms"), 1);
    expect(w.endpoints.map((x) => x.inserts)).toEqual([1, 1]);
  } finally {
    a.down();
    b.down();
    for (const x of endpoints) await x.client.close();
    for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await clients[i]!.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
  }
});

/**
 * A writer over three endpoints, each a proxy in front of the same server, writing a table of its
 * own (`suffix`); the proxies, clients and table are removed afterwards.
 */
async function withThreeEndpoints(server: { url: string }, i: number, suffix: string, fn: (w: ClickHouseWriter, proxies: TcpProxy[]) => Promise<void>) {
  const t = `${table}_${suffix}`;
  await migrate(clients[i]!, "e2e", t);
  const proxies = [0, 1, 2].map(() => TcpProxy.inFrontOf(server.url));
  const endpoints = proxies.map((p, k) => ({ name: `e${k}`, client: createClickHouse(cfg(p.url), "default") }));
  try {
    await fn(new ClickHouseWriter(endpoints, "e2e", t), proxies);
  } finally {
    for (const p of proxies) p.down();
    for (const x of endpoints) await x.client.close();
    for (const name of [`${t}_offsets_mv`, `${t}_offsets`, t]) await clients[i]!.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
  }
}

// Regression (the delivery simulation's slow-refuse-concurrent-failure-cursor): the endpoint cursor
// is shared by the inserts in flight. One that lost its answer at the first endpoint, after another
// had moved the cursor past the second, moved it back onto the second: the other's next attempt went
// there again, and a batch spent its retries on two failing endpoints while the third was never tried.
test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: a failure elsewhere does not move the endpoint cursor back onto an endpoint another insert found failing", (_n, server, i) =>
  withThreeEndpoints(server, i, "cursor", async (w, proxies) => {
    await w.insert(body("warmup"), 1); // e0 takes it: the cursor is at e0
    // B goes to e0 and is held there.
    const held = proxies[0]!.hold("held-b");
    const b = w.insert(body("held-b"), 1).then(() => null, (e: unknown) => e);
    await held.seen;
    // From now on e0 and e1 store inserts and lose their answers. C fails at e0 (the cursor to e1),
    // then A at e1 (the cursor to e2).
    proxies[0]!.loseAnswers(() => "reset");
    proxies[1]!.loseAnswers(() => "reset");
    for (const what of ["c", "a"]) expect(await w.insert(body(what), 1).then(() => null, (e: unknown) => e)).toMatchObject({ mayHaveStored: true });
    // Then B's answer is lost at e0.
    held.release();
    expect(await b).toMatchObject({ mayHaveStored: true, attempts: [{ endpoint: 0 }] });
    // A's next attempt goes to e2, which answers; e1 gets no second insert.
    await w.insert(body("a"), 1);
    expect(w.endpoints.map((x) => x.inserts)).toEqual([1, 0, 1]);
    expect([proxies[0]!.lost.reset, proxies[1]!.lost.reset]).toEqual([2, 1]);
  }));

// Regression (the delivery simulation's slow-endpoints-retry-untried-endpoint): with two endpoints
// slow and a third sound, a batch's insert was ended at its lease's end on the second, then another
// batch's slow insert there succeeded and pointed the cursor back at it: the first batch's last
// attempt went there again, and its valid records to the DLQ. A batch's retries now try the
// endpoints its rows have not failed at first, wherever the shared cursor points.
test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: an insert tries the endpoints its rows have not failed at first, wherever the cursor points", (_n, server, i) =>
  withThreeEndpoints(server, i, "untried", async (w) => {
    await w.insert(body("warmup"), 1); // e0 takes it: the cursor is at e0
    await w.insert(body("x"), 1, undefined, new Set([0])); // its rows failed at e0: e1 first
    expect(w.endpoints.map((x) => x.inserts)).toEqual([1, 1, 0]);
    await w.insert(body("y"), 1, undefined, new Set([1, 2])); // the cursor at e1, where they failed: e0
    expect(w.endpoints.map((x) => x.inserts)).toEqual([2, 1, 0]);
    await w.insert(body("z"), 1, undefined, new Set([0, 1, 2])); // failed everywhere: the cursor's order
    expect(w.endpoints.map((x) => x.inserts)).toEqual([3, 1, 0]);
  }));

// Rows a partition's last owner may have stored are looked up with no attempt of this worker's to
// end: through a Distributed table with two endpoints, ending nothing asked the other endpoints to
// kill `initial_query_id IN ()`, which the server refuses as a syntax error, and every such batch
// went to the DLQ after its retries (the cluster scenarios in CI).
test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, i] as const))("%s: ending no insert through two endpoints of a Distributed table sends nothing and returns", async (_n, i) => {
  const ch = clients[i]!;
  const w = new ClickHouseWriter([{ name: "a", client: ch }, { name: "b", client: ch }], "e2e", table, { requestTimeoutMs: 5000, syncDistributed: true });
  expect(await w.endInserts([]).then(() => "returned", (e: unknown) => String(e))).toBe("returned");
});
