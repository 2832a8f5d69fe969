// Guards the infrastructure: the ClickHouse that scripts/services.sh starts is real and usable from Bun.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { clickhouse, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const ch = clickhouse();
afterAll(() => ch.close());

test("ClickHouse answers ping", async () => {
  expect((await ch.ping()).success).toBe(true);
});

test("ClickHouse round trip: create a scratch table, insert JSONEachRow, select, drop", async () => {
  const table = uniqueName("infra_rt");
  await ch.command({ query: `CREATE TABLE ${table} (id UInt64, name String) ENGINE = Memory` });
  try {
    await ch.insert({ table, values: [{ id: "18446744073709551615", name: "max" }, { id: 1, name: "one" }], format: "JSONEachRow" });
    const rows = await (await ch.query({ query: `SELECT toString(id) AS id, name FROM ${table} ORDER BY name`, format: "JSONEachRow" })).json();
    expect(rows).toEqual([{ id: "18446744073709551615", name: "max" }, { id: "1", name: "one" }]);
  } finally {
    await ch.command({ query: `DROP TABLE ${table}` });
  }
  const left = await (await ch.query({ query: `SELECT count() AS n FROM system.tables WHERE name = '${table}'`, format: "JSONEachRow" })).json<{ n: string }>();
  expect(Number(left[0]?.n)).toBe(0);
});
