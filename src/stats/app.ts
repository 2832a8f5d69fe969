/**
 * The HTTP surface: /internal/stats (JSON), /metrics (Prometheus), /healthz, /readyz, /runningz.
 * Read-only but for one word of the operator's, POST /internal/breaker/reset, taken from loopback
 * alone (inside the pod: `cdr-worker probe --post …`), since the port has no authentication. Every
 * answer comes from in-memory state, never from a Kafka or ClickHouse call.
 */
import { Hono } from "hono";
import { metricsText } from "./metrics.ts";
import { statsSnapshot, type StatsSource } from "./snapshot.ts";

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

export function createStatsApp(source: StatsSource): Hono {
  const app = new Hono();
  app.get("/internal/stats", function stats(c) {
    return c.json(statsSnapshot(source));
  });
  app.get("/metrics", function metrics(c) {
    return c.text(metricsText(source), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
  });
  app.get("/healthz", function healthz(c) {
    return c.json({ status: "ok" });
  });
  app.get("/readyz", function readyz(c) {
    const r = source.ready();
    return c.json({ status: r.ready ? "ready" : "not_ready", reasons: r.reasons }, r.ready ? 200 : 503);
  });
  // For an orchestrator's readiness probe: 503 only while the worker starts or stops. A standby (no
  // partition) or a worker waiting for ClickHouse runs; /readyz says why it takes no records, for
  // alerts, and as a pod's readiness it would hold every drain and rollout (docs/install.md, "Probes").
  app.get("/runningz", function runningz(c) {
    const state = source.state();
    const running = state === "running" || state === "tripped";
    return c.json({ status: running ? "running" : "not_running", state }, running ? 200 : 503);
  });
  app.post("/internal/breaker/reset", function resetBreaker(c) {
    const ip = (c.env as { requestIP?: (r: Request) => { address: string } | null } | undefined)?.requestIP?.(
      c.req.raw,
    )?.address;
    if (ip === undefined || !LOOPBACK.has(ip)) return c.json({ error: "only from loopback" }, 403);
    return c.json({ reset: source.resetBreaker?.() ?? false });
  });
  const known = new Set(["/internal/stats", "/metrics", "/healthz", "/readyz", "/runningz", "/internal/breaker/reset"]);
  app.all("*", function fallback(c) {
    if (known.has(c.req.path)) return c.json({ error: "method not allowed" }, 405, { allow: "GET, HEAD" });
    return c.json({ error: "not found" }, 404);
  });
  return app;
}
