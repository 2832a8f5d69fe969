// The writer against real sockets: a refusal of ClickHouse 18.16 and of the 26.9 engine's test
// endpoint is a data error naming row and column; each server gets only the settings its version
// knows; a connection the peer resets is transient.
import { afterAll, expect, test } from "bun:test";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { ClickHouseInsertError } from "../../src/clickhouse/insert-error.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { insertSettings } from "../../src/clickhouse/server-version.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { CLICKHOUSE_SERVERS, uniqueName } from "../support/services.ts";

const table = uniqueName("writer").replace(/\W/g, "_");
const cfg = (url: string) => ({ url, user: "default", password: "", database: "default", table, requestTimeoutMs: 5000 });
const clients = CLICKHOUSE_SERVERS.map((s) => createClickHouse(cfg(s.url), "default"));
afterAll(async () => {
  for (const ch of clients) {
    await ch.command({ query: `DROP TABLE IF EXISTS e2e.${table}` }).catch(() => {});
    await ch.close();
  }
});

const row = (start: string) =>
  `6ba7b810-9dad-51d1-80b4-00c04fd430c8\tr\td\t+4915112345678\tvoice\tLTE_4G\t1_2\t${start}\t0000000010\t10\t1\t2\t3\t0\t0000000100\n`;

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: a value the server cannot read is a data error with its row and column, not retryable", async (_n, server, i) => {
  const ch = clients[i]!;
  await migrate(ch, "e2e", table);
  const w = new ClickHouseWriter(ch, "e2e", table);
  await w.insert(row("0000000001") + row("0000000002"), 2);
  expect(w.endpoints[0]!.version).toMatch(server.version);
  const e = await w.insert(row("0000000001") + row("x") + row("0000000003"), 3).then(() => null, (e: unknown) => e);
  expect(e).toBeInstanceOf(ClickHouseInsertError);
  const err = e as ClickHouseInsertError;
  expect([err.kind, err.retryable, err.row]).toEqual(["data", false, 2]);
  expect(err.column).toBe("session_start_time");
});

test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, s, i] as const))("%s: the server takes the writer's insert settings for its version and reads async_insert=0 where it has the setting", async (_n, server, i) => {
  const ch = clients[i]!;
  await migrate(ch, "e2e", table);
  const w = new ClickHouseWriter(ch, "e2e", table);
  await w.insert(row("0000000009"), 1);
  // What the server itself reports for a query sent with the writer's settings.
  const settings = insertSettings(w.endpoints[0]!.version!);
  const rs = await ch.query({ query: "SELECT name, value FROM system.settings WHERE name IN ('async_insert', 'date_time_input_format')", format: "JSONEachRow", clickhouse_settings: settings });
  const seen = Object.fromEntries((await rs.json<{ name: string; value: string }>()).map((r) => [r.name, r.value]));
  expect(seen.date_time_input_format).toBe("basic");
  if (server.version.test("18.16.")) expect(seen.async_insert).toBeUndefined(); // 18.16 has no such setting
  else expect(seen.async_insert).toBe("0");
});

test("a socket reset is classified as transient (retryable)", async () => {
  // A peer that accepts and resets every connection, as a restarting server or a proxy would.
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open(s) { s.terminate(); }, data() {} } });
  const client = createClickHouse(cfg(`http://127.0.0.1:${listener.port}`), "default");
  try {
    const e = await new ClickHouseWriter(client, "e2e", table).insert(row("0000000001"), 1).then(() => null, (e: unknown) => e);
    expect(e).toBeInstanceOf(ClickHouseInsertError);
    expect([(e as ClickHouseInsertError).kind, (e as ClickHouseInsertError).retryable, (e as ClickHouseInsertError).serverCode]).toEqual(["transient", true, null]);
  } finally {
    listener.stop(true);
    await client.close();
  }
});
