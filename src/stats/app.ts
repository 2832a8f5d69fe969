/**
 * The HTTP surface: /internal/stats (JSON), /metrics (Prometheus), /healthz, /readyz.
 * Read-only; every answer comes from in-memory state, never from a Kafka or ClickHouse call.
 */
import { Hono } from "hono";
import { metricsText } from "./metrics.ts";
import { statsSnapshot, type StatsSource } from "./snapshot.ts";

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
  const known = new Set(["/internal/stats", "/metrics", "/healthz", "/readyz"]);
  app.all("*", function fallback(c) {
    if (known.has(c.req.path)) return c.json({ error: "method not allowed" }, 405, { allow: "GET, HEAD" });
    return c.json({ error: "not found" }, 404);
  });
  return app;
}
