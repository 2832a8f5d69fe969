// How long an insert whose answer was lost can go on storing on the server. Every insert carries
// max_execution_time (a second under the request timeout); the worker relies on it only where a
// server is shown here to end an insert at it: the 26.9 engine does, 18.16 runs one past it. Then
// an endpoint that no longer answers holds a lost answer's check only until the insert's bound has
// passed, and the rows are read on another endpoint.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { classifyInsertError, ClickHouseInsertError, HeldCheckError } from "../../src/clickhouse/insert-error.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { boundsInsertLife } from "../../src/clickhouse/server-version.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { INSERT_END_MARGIN_MS, SILENT_ENDPOINT_HOLD_MS } from "../../src/clickhouse/running-inserts.ts";
import { storedRowKey } from "../../src/clickhouse/row-lookup.ts";
import { systemClock, type Clock } from "../../src/time/clock.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { CLICKHOUSE_SERVERS, uniqueName } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";

setDefaultTimeout(60_000);

const table = uniqueName("insert_life").replace(/\W/g, "_");
/** The request timeout: the writer sends max_execution_time = 1 s. */
const REQUEST_TIMEOUT_MS = 2_000;
/** Rows of the insert; a view that sleeps 0.2 s a row keeps it on the server 2.8 s (the 3 s cap a block). */
const ROWS = 14;
const cfg = (url: string) => ({ url, user: "default", password: "", database: "default", table, requestTimeoutMs: REQUEST_TIMEOUT_MS });
const clients = CLICKHOUSE_SERVERS.map((s) => createClickHouse(cfg(s.url), "default"));
afterAll(async () => {
  for (const ch of clients) {
    for (const name of [`${table}_slow`, `${table}_slow_sink`, `${table}_offsets_mv`, `${table}_offsets`, table])
      await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
    await ch.close();
  }
});

const base = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
if (!base.ok) throw new Error("fixture record must be valid");
const body = (n: number, ids = Array.from({ length: n }, () => crypto.randomUUID())) => {
  const b = new RowBinaryBuffer();
  for (let i = 0; i < n; i++) b.add({ ...base.row, cdr_id: ids[i]! }, 100, 0, i);
  return b.bytes().slice();
};

const count = async (ch: (typeof clients)[number], name: string) =>
  Number((await (await ch.query({ query: `SELECT count() FROM e2e.${name}`, format: "TabSeparated" })).text()).trim());

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: an insert's max_execution_time ends it on the server exactly where the worker relies on it", async (_n, server, i) => {
  const ch = clients[i]!;
  await migrate(ch, "e2e", table);
  await ch.command({ query: `CREATE TABLE IF NOT EXISTS e2e.${table}_slow_sink (x UInt8) ENGINE = MergeTree ORDER BY x` });
  await ch.command({
    query: `CREATE MATERIALIZED VIEW IF NOT EXISTS e2e.${table}_slow TO e2e.${table}_slow_sink AS SELECT sleepEachRow(0.2) AS x FROM e2e.${table}`,
  });
  await ch.command({ query: `TRUNCATE TABLE e2e.${table}_slow_sink` });
  const version = (await (await ch.query({ query: "SELECT version()", format: "TabSeparated" })).text()).trim();
  const bounded = boundsInsertLife(version);
  const w = new ClickHouseWriter(ch, "e2e", table, { requestTimeoutMs: REQUEST_TIMEOUT_MS });
  const started = performance.now();
  const err = await w.insert(body(ROWS), ROWS).then(() => null, (e: unknown) => e);
  const elapsed = performance.now() - started;
  expect(err).toBeInstanceOf(ClickHouseInsertError);
  const failure = err as ClickHouseInsertError;
  expect(failure.mayHaveStored).toBe(true);
  if (server.version.test("26.9.")) {
    // The server ended it at its limit, before the view's 2.8 s and the client's 2 s.
    expect([bounded, failure.serverCode, failure.serverType]).toEqual([true, 159, "TIMEOUT_EXCEEDED"]);
    expect(elapsed).toBeLessThan(REQUEST_TIMEOUT_MS);
    expect(failure.attempts[0]!.endedBy).toBeGreaterThan(performance.now());
    expect(await count(ch, `${table}_slow_sink`)).toBe(0);
  } else {
    // The client gave up at its timeout; the server ran the insert on, past its max_execution_time,
    // and stored all of it: nothing bounds an insert's life on the server here.
    expect([bounded, failure.serverCode]).toEqual([false, null]);
    expect(failure.attempts[0]!.endedBy).toBeUndefined();
    for (let k = 0; (await count(ch, `${table}_slow_sink`)) < ROWS; k++) {
      expect(k).toBeLessThan(100);
      await Bun.sleep(50);
    }
    expect(performance.now() - started).toBeGreaterThan(2_500);
  }
});

test("a lost answer's check waits for an endpoint that no longer answers only until the insert's bound has passed, then reads elsewhere", async () => {
  const i = CLICKHOUSE_SERVERS.findIndex((s) => s.version.test("26.9."));
  const ch = clients[i]!;
  const gone = TcpProxy.inFrontOf(CLICKHOUSE_SERVERS[i]!.url);
  const other = TcpProxy.inFrontOf(CLICKHOUSE_SERVERS[i]!.url);
  const a = createClickHouse(cfg(gone.url), "default");
  const b = createClickHouse(cfg(other.url), "default");
  let now = 0;
  const clock: Clock = {
    ...systemClock,
    mono: () => now,
    now: () => now,
    sleep: async (ms: number) => void (now += ms),
  };
  try {
    await migrate(ch, "e2e", table);
    const w = new ClickHouseWriter([{ name: "a", client: a }, { name: "b", client: b }], "e2e", table, { requestTimeoutMs: REQUEST_TIMEOUT_MS, clock });
    await w.insert(body(1), 1); // versions learned
    gone.loseAnswers(() => "reset");
    const id = crypto.randomUUID();
    const err = (await w.insert(body(1, [id]), 1).then(() => null, (e: unknown) => e)) as ClickHouseInsertError;
    expect(err?.attempts).toHaveLength(1);
    const attempt = err.attempts[0]!;
    expect(attempt.endedBy).toBe(1_000 + INSERT_END_MARGIN_MS);
    gone.down();
    // What the insert does there is unknown until its bound: the check waits until then, not longer.
    now = 1_500;
    await w.endInserts(err.attempts);
    expect(now).toBe(attempt.endedBy!);
    const start = base.row.session_start_time;
    const found = await w.storedRows({ partitions: [0], minOffset: 0, maxOffset: 0, starts: [start] });
    expect(found.has(storedRowKey(0, 0, id, start))).toBe(true);
    // Past it, no wait at all.
    await w.endInserts(err.attempts);
    expect(now).toBe(attempt.endedBy!);
    // An attempt with no bound (a server that does not end inserts) holds the check for as long as it is silent.
    await expect(w.endInserts([{ endpoint: attempt.endpoint, queryId: attempt.queryId }])).rejects.toThrow();
    expect(now).toBe(attempt.endedBy!);
  } finally {
    gone.down();
    other.down();
    await a.close();
    await b.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s: a lost answer's check with no bound is held by its silent endpoint while another answers, for SILENT_ENDPOINT_HOLD_MS, and no longer", async (_n, server) => {
  const gone = TcpProxy.inFrontOf(server.url);
  const other = TcpProxy.inFrontOf(server.url);
  const a = createClickHouse(cfg(gone.url), "default");
  const b = createClickHouse(cfg(other.url), "default");
  let now = 0;
  const clock: Clock = { ...systemClock, mono: () => now, now: () => now, sleep: async (ms: number) => void (now += ms) };
  try {
    const w = new ClickHouseWriter([{ name: "a", client: a }, { name: "b", client: b }], "e2e", table, { requestTimeoutMs: REQUEST_TIMEOUT_MS, clock });
    // An insert to a whose answer was lost, as a server that does not bound an insert's life leaves it.
    const attempt = { endpoint: 0, queryId: `cdr-worker:held:${crypto.randomUUID()}`, failedAt: 0 };
    await w.endInserts([attempt]); // a answers: nothing of it runs, the check goes on
    gone.down();
    now = 1_000;
    const held = await w.endInserts([attempt]).then(() => null, (e: unknown) => e);
    expect(held).toBeInstanceOf(HeldCheckError);
    expect([(held as HeldCheckError).endpoint, (held as HeldCheckError).until]).toEqual(["a", SILENT_ENDPOINT_HOLD_MS]);
    expect(classifyInsertError((held as HeldCheckError).cause, "").serverCode).toBeNull(); // the refused connection itself
    // Neither answers: ClickHouse is away, the policy's business (CH_UNREACHABLE_POLICY), not held.
    other.down();
    const away = await w.endInserts([attempt]).then(() => null, (e: unknown) => e);
    expect(away).toBeInstanceOf(Error);
    expect(away).not.toBeInstanceOf(HeldCheckError);
    // Past the hold the endpoint's silence counts as any failure's.
    other.up();
    now = SILENT_ENDPOINT_HOLD_MS;
    const past = await w.endInserts([attempt]).then(() => null, (e: unknown) => e);
    expect(past).toBeInstanceOf(Error);
    expect(past).not.toBeInstanceOf(HeldCheckError);
    expect(now).toBe(SILENT_ENDPOINT_HOLD_MS); // held checks sleep in the retry policy, never here
  } finally {
    gone.down();
    other.down();
    await a.close();
    await b.close();
  }
});

test("an insert's request ends at the time its admission gives (the membership lease's end), answered or not: the attempt is uncertain", async () => {
  const server = CLICKHOUSE_SERVERS[0]!;
  await migrate(clients[0]!, "e2e", table);
  const proxy = TcpProxy.inFrontOf(server.url);
  const client = createClickHouse(cfg(proxy.url), "default");
  try {
    const w = new ClickHouseWriter(client, "e2e", table, { requestTimeoutMs: 10_000 });
    await w.insert(body(1), 1); // the version learned: the next request is the insert itself
    const held = proxy.hold("INSERT"); // in the URL, encoded
    const started = performance.now();
    const err = await w.insert(body(1), 1, async () => performance.now() + 300).then(() => null, (e: unknown) => e);
    const elapsed = performance.now() - started;
    await held.seen;
    expect(err).toBeInstanceOf(ClickHouseInsertError);
    const failure = err as ClickHouseInsertError;
    expect([failure.kind, failure.mayHaveStored, failure.attempts.length]).toEqual(["transient", true, 1]);
    // At the admission's time, not at the request timeout.
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2_000);
  } finally {
    proxy.down();
    await client.close();
  }
});

test("an admission whose lease has ended by the send (a freeze after it) is asked again: nothing is sent past the lease", async () => {
  await migrate(clients[0]!, "e2e", table);
  const w = new ClickHouseWriter(clients[0]!, "e2e", table, { requestTimeoutMs: 10_000 });
  const given: number[] = [];
  const admit = async () => {
    // The first lease has ended by the time it is given; the second holds.
    const end = given.length === 0 ? performance.now() - 1 : performance.now() + 5_000;
    given.push(end);
    return end;
  };
  await w.insert(body(1), 1, admit);
  expect(given).toHaveLength(2);
});
