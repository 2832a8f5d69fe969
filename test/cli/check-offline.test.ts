// `cdr-worker check --offline`: the configuration alone, as a deploy pipeline validates it before any
// service is up. It connects to nothing: brokers and ClickHouse that cannot answer change nothing.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const NOWHERE = { PATH: process.env.PATH!, KAFKA_BROKERS: "192.0.2.1:9092", CLICKHOUSE_URL: "http://192.0.2.1:8123", LOG_LEVEL: "warn" };

async function check(env: Record<string, string>) {
  const p = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "check", "--offline"], { env: { ...NOWHERE, ...env }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out.trim(), err: err.trim().split("\n").filter(Boolean) };
}

test("a sound configuration passes without a connection; the summary says offline and the stop deadline", async () => {
  const t0 = performance.now();
  const r = await check({ DLQ_PROVENANCE_KEY: "k".repeat(64) });
  expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: [] });
  expect(JSON.parse(r.out)).toEqual({
    check: "passed", exit: 0, problems: 0, warnings: 0, delivery: "exactly-once", dlq_provenance: "signed", shutdown_timeout_seconds: 45, offline: true,
  });
  expect(performance.now() - t0).toBeLessThan(15_000); // a connection to 192.0.2.1 would wait far longer
});

test("what only a parsed configuration shows: no key under exactly-once and a short stop deadline, each a line, exit 2", async () => {
  const r = await check({ SHUTDOWN_TIMEOUT_SECONDS: "5" });
  expect(r.code).toBe(2);
  expect(r.err).toEqual([
    expect.stringMatching(/^config error: DLQ_PROVENANCE_KEY=\(unset\): expected a key under exactly-once/),
    expect.stringMatching(/^config error: SHUTDOWN_TIMEOUT_SECONDS="?5"?: expected at least 45/),
  ]);
  expect(JSON.parse(r.out)).toMatchObject({ check: "failed", exit: 2, problems: 2, offline: true });
});

test("bad values and a property librdkafka refuses: one line each, exit 2", async () => {
  const r = await check({ DLQ_PROVENANCE: "unsigned", BATCH_SIZE: "0", KAFKA_PROP_NO_SUCH_PROPERTY: "1" });
  expect(r.code).toBe(2);
  expect(r.err).toEqual([expect.stringMatching(/^config error: BATCH_SIZE="0": expected a whole number/)]);
  const prop = await check({ DLQ_PROVENANCE: "unsigned", KAFKA_PROP_NO_SUCH_PROPERTY: "1" });
  expect([prop.code, prop.err]).toEqual([2, [expect.stringMatching(/^config error: KAFKA_PROP_NO_SUCH_PROPERTY="1": librdkafka refuses no.such.property/)]]);
});
