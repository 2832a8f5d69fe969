import { expect, setDefaultTimeout, test } from "bun:test";
import { createStatsApp } from "../../src/stats/app.ts";
import { Counters } from "../../src/stats/counters.ts";
import type { StatsSource } from "../../src/stats/snapshot.ts";

setDefaultTimeout(60_000);

function source(ready = true): StatsSource {
  const c = new Counters();
  c.consumed = 13;
  c.partition(0).consumed = 13;
  c.durableClickhouse = 10;
  c.partition(0).durableClickhouse = 10;
  c.durableDlq = 3;
  c.partition(0).durableDlq = 3;
  c.byService.set("voice", 6).set("data", 4);
  c.byRat["3G"] = 7;
  c.byRat.LTE_4G = 3;
  c.byDlqReason.malformed_json = 1;
  c.byDlqReason.invalid_rat_value = 1;
  c.byDlqReason.invalid_epoch = 1;
  c.lastFlushAt = Date.parse("2026-01-01T00:00:00Z");
  c.flushSeconds.observe(0.02);
  return {
    counters: c, version: "0.2.0", workerInstance: "w1", topic: "cdr.raw", state: () => "running", bufferedRows: () => 0,
    positions: () => new Map([[0, { committed: 13, consumed: 13 }]]), assignment: () => [2, 0], highWatermark: () => 20,
    phoneCache: () => ({ hits: 3, misses: 1, size: 1 }), breakerRatio: () => 0.1, eventLoopLagMs: () => 3,
    ready: () => (ready ? { ready: true, reasons: [] } : { ready: false, reasons: ["ClickHouse does not answer ping"] }),
  };
}

test("Internal stats queried: 200 with totals, buffer, last flush and breakdowns", async () => {
  const res = await createStatsApp(source()).request("/internal/stats");
  expect(res.status).toBe(200);
  const s = (await res.json()) as Record<string, unknown>;
  expect(s).toMatchObject({
    total_processed: 13, total_dlq: 3, in_flight_buffer: 0, last_flush_at: "2026-01-01T00:00:00.000Z", assigned_partitions: [0, 2],
    by_service_type: { voice: 6, data: 4 }, by_rat: { "3G": 7, LTE_4G: 3, "5G_NR": 0 },
    by_dlq_reason: { malformed_json: 1, invalid_rat_value: 1, invalid_epoch: 1, missing_required_field: 0, normalization_error: 0, ch_insert_failed: 0 },
    partitions: { "0": { consumed: 13, durable_clickhouse: 10, durable_dlq: 3, in_flight: 0, committed_offset: 13, high_watermark: 20, lag: 7 } },
    phone_cache: { hit_rate: 0.75 },
    worker_instance: "w1",
  });
});

test("/metrics speaks the Prometheus text format with conventional names", async () => {
  const res = await createStatsApp(source()).request("/metrics");
  expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4");
  const body = await res.text();
  expect(body).toContain('cdr_worker_records_consumed_total{partition="0"} 13');
  expect(body).toContain('cdr_worker_dlq_records_total{reason="invalid_epoch"} 1');
  expect(body).toContain("# TYPE cdr_worker_flush_duration_seconds histogram");
  expect(body).toContain('cdr_worker_flush_duration_seconds_bucket{le="0.025"} 1');
  expect(body).toContain('cdr_worker_flush_duration_seconds_bucket{le="+Inf"} 1');
});

test("/healthz is 200; /readyz is 503 with reasons when not ready", async () => {
  expect((await createStatsApp(source()).request("/healthz")).status).toBe(200);
  expect((await createStatsApp(source(true)).request("/readyz")).status).toBe(200);
  const res = await createStatsApp(source(false)).request("/readyz");
  expect(res.status).toBe(503);
  expect(await res.json()).toEqual({ status: "not_ready", reasons: ["ClickHouse does not answer ping"] });
});

test("unknown paths are 404, wrong methods 405, and the one write endpoint takes only a POST", async () => {
  const app = createStatsApp(source());
  expect((await app.request("/nope")).status).toBe(404);
  expect((await app.request("/internal/stats", { method: "POST" })).status).toBe(405);
  expect((await app.request("/metrics", { method: "DELETE" })).status).toBe(405);
  expect((await app.request("/internal/breaker/reset")).status).toBe(405);
});

test("the breaker's reset is the operator's word from loopback alone: another address gets 403 and resets nothing", async () => {
  let resets = 0;
  const app = createStatsApp({ ...source(), resetBreaker: () => (resets++, true) });
  const from = (address: string) => ({ requestIP: () => ({ address, family: "IPv4", port: 40000 }) });
  const post = (address?: string) =>
    app.request("/internal/breaker/reset", { method: "POST" }, address === undefined ? undefined : from(address));
  for (const address of ["10.1.2.3", "192.168.0.9", "::ffff:10.0.0.1"]) expect((await post(address)).status).toBe(403);
  expect((await post()).status).toBe(403); // no address known: refused too
  expect(resets).toBe(0);
  for (const address of ["127.0.0.1", "::1"]) {
    const res = await post(address);
    expect([res.status, await res.json()]).toEqual([200, { reset: true }]);
  }
  expect(resets).toBe(2);
});

test("/runningz is 503 only while the worker starts or stops: a standby, or one waiting for ClickHouse, runs", async () => {
  const at = (state: string, ready = false) => createStatsApp({ ...source(ready), state: () => state }).request("/runningz");
  for (const state of ["running", "tripped"]) expect({ state, status: (await at(state)).status }).toEqual({ state, status: 200 });
  for (const state of ["starting", "draining", "stopped", "failed"]) expect({ state, status: (await at(state, true)).status }).toEqual({ state, status: 503 });
  expect(await (await at("starting")).json()).toEqual({ status: "not_running", state: "starting" });
});
