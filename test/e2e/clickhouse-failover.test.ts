// CLICKHOUSE_URL with several endpoints: an insert that fails as transient at one goes to the next
// at once (no retry delay, no DLQ); /readyz is 503 only when no endpoint answers.
import { expect, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { CLICKHOUSE_URL, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { notReadyReasons, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

const { names, distinctIds } = e2eScope();

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
