// CLICKHOUSE_URL with several endpoints: an insert that one endpoint cannot take goes to the next
// at once (no retry delay, no DLQ), whether it does not answer or refuses for a reason of its own
// (a table missing there, credentials it does not know); /readyz is 503 only when no endpoint answers.
// The refusals come from the real servers: ClickHouse 18.16 and the 26.9 engine's test endpoint.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { startChdbEndpoint } from "../support/chdb.ts";
import { CLICKHOUSE_CURRENT_URL, CLICKHOUSE_URL, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { notReadyReasons, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, distinctIds } = e2eScope();
const current = e2eScope(CLICKHOUSE_CURRENT_URL);

test("an endpoint that goes away mid-stream: inserts continue on the next without retries; none left → not ready", async () => {
  const n = await names("failover");
  const a = TcpProxy.inFrontOf(CLICKHOUSE_URL);
  const b = TcpProxy.inFrontOf(CLICKHOUSE_URL);
  const w = await startWorker(workerEnv(n, { CLICKHOUSE_URL: `${a.url},${b.url}`, CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0" }));
  const p = new Producer(props);
  try {
    const send = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++) await p.produce(n.raw, toJson(withFields({ raw_id: `fo-${i}` })), { partition: i % 3 });
    };
    await send(0, 30);
    await waitFor(async () => ((await distinctIds(n)) === 30 ? true : undefined), 20_000, "first rows through endpoint a");
    // Rows are visible before their insert's answer is back: an endpoint cut in between loses an
    // answer (a case of its own, test/e2e/lost-answers.test.ts), so the cut waits for the answers.
    await statsWhen(w, (s) => s.total_clickhouse === 30 && s.in_flight_buffer === 0, 10_000, "first inserts answered");
    a.down(); // endpoint a is gone: the next inserts must land through b at once
    await send(30, 30);
    await waitFor(async () => ((await distinctIds(n)) === 60 ? true : undefined), 20_000, "rows through endpoint b");
    const s = await statsWhen(w, (s) => s.total_clickhouse === 60, 10_000, "all durable");
    expect(s.clickhouse_retries).toBe(0);
    expect(s.clickhouse_exhausted_batches).toBe(0);
    expect(s.total_dlq).toBe(0);
    const [ea, eb] = s.clickhouse_endpoints as Array<{ endpoint: string; up: boolean; inserts: number; failures: number }>;
    expect([ea!.endpoint, eb!.endpoint]).toEqual([new URL(a.url).host, new URL(b.url).host]);
    expect(ea!.up).toBe(false);
    expect(ea!.failures).toBeGreaterThan(0);
    expect(eb!.inserts).toBeGreaterThan(0);
    expect((await fetch(`${w.statsUrl}/readyz`)).status).toBe(200); // b still answers
    b.down();
    const reasons = await notReadyReasons(w, 20_000, "not ready with no endpoint left");
    expect(reasons).toContain("ClickHouse does not answer ping");
    const metrics = await (await fetch(`${w.statsUrl}/metrics`)).text();
    expect(metrics).toContain(`cdr_worker_clickhouse_endpoint_inserts_total{endpoint="${new URL(b.url).host}"}`);
  } finally {
    p.close();
    a.down();
    b.down();
    w.proc.kill("SIGKILL");
  }
}, 60_000);

test.each([
  ["18.16 lacks the table (UNKNOWN_TABLE); the 26.9 engine has it", "18.16"],
  ["the 26.9 engine lacks the table (UNKNOWN_TABLE); 18.16 has it", "26.9"],
  ["the 26.9 engine refuses the worker's password (AUTHENTICATION_FAILED); 18.16 takes it", "auth"],
] as const)("the first endpoint refuses: %s → every row through the other, start-up check included, no retry, nothing dead-lettered", async (_n, which) => {
  const chdbWithPassword = which === "auth" ? await startChdbEndpoint({ password: "not-the-workers" }) : null;
  const healthy = which === "18.16" ? current : { names, distinctIds };
  const refusing = which === "18.16" ? CLICKHOUSE_URL : which === "26.9" ? CLICKHOUSE_CURRENT_URL : chdbWithPassword!.url;
  const n = await healthy.names(`refuse${which.replace(/\W/g, "")}`);
  const w = await startWorker(workerEnv(n, { CLICKHOUSE_URL: `${refusing},${n.clickhouseUrl}` }));
  const p = new Producer(props);
  try {
    for (let i = 0; i < 30; i++) await p.produce(n.raw, toJson(withFields({ raw_id: `rf-${i}` })), { partition: i % 3 });
    const s = await statsWhen(w, (s) => s.total_clickhouse === 30, 20_000, "all rows stored");
    expect(await healthy.distinctIds(n)).toBe(30);
    expect(s.total_dlq).toBe(0);
    expect(s.clickhouse_retries).toBe(0);
    expect(s.clickhouse_exhausted_batches).toBe(0);
    const [ea, eb] = s.clickhouse_endpoints as Array<{ up: boolean; inserts: number; failures: number }>;
    expect(ea!.failures).toBeGreaterThan(0);
    expect(ea!.inserts).toBe(0);
    expect(eb!.inserts).toBeGreaterThan(0);
    expect(await w.stop()).toBe(0);
  } finally {
    p.close();
    w.proc.kill("SIGKILL");
    await chdbWithPassword?.stop();
  }
}, 60_000);
