// The stats server cannot be used to stall the worker: slow-loris connections and a 10 MB request
// against the real server while the worker drains a stream; stats stay fast and every record lands.
import { expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "node:net";
import { e2eScope } from "../support/e2e.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, distinctIds } = e2eScope();

test("slow-loris clients and a 10 MB request neither stall the worker nor the stats it serves", async () => {
  const n = await names("statsdos");
  const w = await startWorker(workerEnv(n, { BATCH_SIZE: "1000" }));
  const url = new URL(w.statsUrl);
  // 200 connections that trickle a request one byte every 200 ms and never finish it.
  const sockets = Array.from({ length: 200 }, () => connect(Number(url.port), url.hostname));
  let stillOpen = sockets.length;
  for (const s of sockets) {
    s.on("error", () => {});
    s.on("close", () => stillOpen--);
  }
  const request = "GET /internal/stats HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000);
  let pos = 0;
  const trickle = setInterval(() => {
    for (const s of sockets) if (!s.destroyed) s.write(request[pos % request.length]!);
    pos++;
  }, 200);
  try {
    // A 10 MB body is refused without being read whole.
    const big = await fetch(`${w.statsUrl}/internal/stats`, { method: "POST", body: new Uint8Array(10 * 1024 * 1024) }).catch(() => null);
    expect(big === null || big.status === 413).toBe(true);
    // Meanwhile the worker drains 50k records and its stats answer at once.
    const { valid } = await produceSynthetic(n.raw, 50_000, 0.03, 77);
    const started = Date.now();
    const latencies: number[] = [];
    await statsWhen(w, (s) => s.total_processed === 50_000, 60_000, "stream drained");
    const seconds = (Date.now() - started) / 1000;
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      expect((await fetch(`${w.statsUrl}/internal/stats`)).status).toBe(200);
      latencies.push(performance.now() - t);
    }
    expect(await distinctIds(n)).toBe(valid);
    expect(50_000 / seconds).toBeGreaterThan(5_000); // the drain runs at full speed, not at the attackers' pace
    expect(Math.max(...latencies)).toBeLessThan(200);
    // The trickling connections are cut after the idle timeout (10 s) instead of being held forever.
    await waitFor(() => (stillOpen < sockets.length ? true : undefined), 20_000, "trickling connections closed");
    expect(stillOpen).toBeLessThan(sockets.length);
  } finally {
    clearInterval(trickle);
    for (const s of sockets) s.destroy();
    expect(await w.stop()).toBe(0);
  }
}, 90_000);

/** Each leaf of the stats JSON as docs/stats.md names it, with its JSON type. */
function leaves(v: unknown, path = "", out = new Map<string, string>()): Map<string, string> {
  const type = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  // Maps of counts and lists of scalars are leaves; objects of named fields and lists of objects are not.
  if (type === "object" && !/^by_/.test(path) && path !== "") {
    for (const [k, x] of Object.entries(v as object)) leaves(x, `${path}.${path === "partitions" ? "<partition>" : k}`, out);
  } else if (path === "") {
    for (const [k, x] of Object.entries(v as object)) leaves(x, k, out);
  } else if (type === "array" && (v as unknown[]).some((x) => typeof x === "object" && x !== null)) {
    for (const x of v as unknown[]) leaves(x, `${path}[]`, out);
  } else {
    const seen = out.get(path);
    out.set(path, seen && seen !== type ? [seen, type].sort().join("|") : type);
  }
  return out;
}

test("docs/stats.md names every field /internal/stats returns, and nothing else, each with its JSON type", async () => {
  const n = await names("statsdoc");
  await produceSynthetic(n.raw, 500, 0.1, 78);
  // With the audit scheduled every second, so that its last result is in the answer too.
  const w = await startWorker(workerEnv(n, { AUDIT_INTERVAL_SECONDS: "1" }));
  const s = await statsWhen(w, (s) => s.total_processed === 500 && s.last_commit_at !== null && s.last_audit?.result === "clean", 30_000, "records durable, audited");
  expect(await w.stop()).toBe(0);
  const returned = leaves(s);
  const doc = await Bun.file(`${ROOT}/docs/stats.md`).text();
  const documented = new Map([...doc.matchAll(/^\| `([^`]+)` \| ([a-z ]+?) \|/gm)].map((m) => [m[1]!, m[2]!]));
  expect([...documented.keys()].sort()).toEqual([...returned.keys()].sort());
  for (const [field, type] of returned) {
    const allowed = documented.get(field)!.split(" or ");
    for (const t of type.split("|")) expect(`${field}: ${t}`).toBe(`${field}: ${allowed.includes(t) ? t : allowed.join(" or ")}`);
  }
  // Every state the worker can be in is explained.
  for (const state of ["starting", "running", "tripped", "draining", "stopped", "failed"]) expect(documented.size > 0 && doc.includes(`\`${state}\``)).toBe(true);
}, 60_000);
