import { expect, setDefaultTimeout, test } from "bun:test";
import { COMMIT_STALL_MS, readiness, type ReadinessInput } from "../../src/stats/readiness.ts";

setDefaultTimeout(60_000);

const NOW = 1_800_000_000_000;
const healthy: ReadinessInput = { assigned: true, clickhouse: { reachable: true, inserting: true }, state: "running", waiting: 0, lastProgressAt: NOW - 1000, now: NOW };

test.each([
  ["healthy", {}, []],
  ["no assignment yet", { assigned: false }, ["no Kafka partition assignment yet"]],
  ["ClickHouse does not answer ping", { clickhouse: { reachable: false, inserting: true } }, ["ClickHouse does not answer ping"]],
  ["inserts failing", { clickhouse: { reachable: true, inserting: false } }, ["ClickHouse inserts failing (retrying)"]],
  ["ClickHouse refuses the worker: the endpoint and the code, no secret", { clickhouse: { reachable: true, inserting: false, refusal: { endpoint: "ch-a:8123", code: 193, type: null } } }, ["ClickHouse at ch-a:8123 refuses the worker: code 193"]],
  ["a current server names the code's type", { clickhouse: { reachable: true, inserting: false, refusal: { endpoint: "ch-b:8123", code: 60, type: "UNKNOWN_TABLE" } } }, ["ClickHouse at ch-b:8123 refuses the worker: code 60 (UNKNOWN_TABLE)"]],
  ["breaker tripped", { state: "tripped" }, ["DLQ circuit breaker tripped"]],
  ["draining", { state: "draining" }, ["worker draining"]],
  ["records wait, last commit recent", { waiting: 500, lastProgressAt: NOW - COMMIT_STALL_MS + 1 }, []],
  ["records wait, no commit for longer than the stall bound", { waiting: 500, lastProgressAt: NOW - COMMIT_STALL_MS - 5000 }, [`no commit for ${Math.round((COMMIT_STALL_MS + 5000) / 1000)} s while 500 records wait`]],
  ["idle: nothing waits, an old last commit is fine", { waiting: 0, lastProgressAt: NOW - 10 * COMMIT_STALL_MS }, []],
  ["several at once", { assigned: false, clickhouse: { reachable: false, inserting: true } }, ["no Kafka partition assignment yet", "ClickHouse does not answer ping"]],
] as const)("%s", (_name, change, reasons) => {
  const r = readiness({ ...healthy, ...change });
  expect(r.reasons).toEqual([...reasons]);
  expect(r.ready).toBe(reasons.length === 0);
});
