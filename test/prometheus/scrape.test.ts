// A real Prometheus (Debian's 2.42, started here on loopback with deploy/prometheus/prometheus.yml,
// the targets pointed at a real worker and a real DLQ table filler) scrapes a worker that processes a
// paced stream with DLQ traffic, and the filler that stores it in the DLQ table. Through Prometheus' HTTP API: every metric the rules and the dashboard name exists, the
// recording rules agree with the stream that was sent, every dashboard query parses and returns a
// series; the scrape passes `promtool check metrics`; the manual's metric list (docs/operations.md) is the scrape's.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Subprocess } from "bun";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { freePort, ROOT, uniqueName, waitFor } from "../support/services.ts";
import { explainedBy, startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();
const dir = `${ROOT}/.local/tmp/${uniqueName("prometheus")}`;
const RATE = 100; // records/s
// The rules' rate windows (1 and 5 minutes) are cut to WINDOW here, as the intervals are to 1 s: a
// stream a little longer than it fills them, so the rules' values at the end are the stream's.
const WINDOW = "15s";
/** Where the alerts' runbook links point: an absolute address, as compose requires one. */
const DOCS_URL = "https://git.example/cdr-worker/blob/v0.3.0/docs";
const SECONDS = 20;
const INVALID_EVERY = 10; // one record in ten goes to the DLQ
let worker: RunningWorker;
let filler: RunningWorker;
let prometheus: Subprocess;
let api = "";

async function query(expr: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>> {
  const res = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await res.json()) as { status: string; error?: string; data: { result: any[] } };
  if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
  return body.data.result;
}

const dashboard = JSON.parse(readFileSync(`${ROOT}/deploy/grafana/cdr-worker.json`, "utf8")) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
const dashboardExprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));
const rulesText = readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8");

/** The worker's own metric names an expression reads (histogram series reduced to their family). */
function metricNames(text: string): string[] {
  return [...new Set([...text.matchAll(/\b(cdr_worker_[a-z_]+|process_resident_memory_bytes)\b/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, "")))];
}

beforeAll(async () => {
  const n = await names("prom");
  // The audit scheduled too, so that its metrics are exported as well.
  worker = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "0.2", AUDIT_INTERVAL_SECONDS: "2" }));
  filler = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "0.2" }), ["bun", `${ROOT}/src/main.ts`, "dlq", "fill"]);
  const target = new URL(worker.statsUrl).host;
  const fillerTarget = new URL(filler.statsUrl).host;
  mkdirSync(dir, { recursive: true });
  const config = readFileSync(`${ROOT}/deploy/prometheus/prometheus.yml`, "utf8")
    .replace(/dns_sd_configs:\n(\s+)- names: \[worker\]\n\s+type: A\n\s+port: 8081/, `static_configs:\n$1- targets: ["${target}"]`)
    .replace(/dns_sd_configs:\n(\s+)- names: \[dlq-fill\]\n\s+type: A\n\s+port: 8081/, `static_configs:\n$1- targets: ["${fillerTarget}"]`)
    .replaceAll("15s", "1s");
  expect(config).toContain(`- targets: ["${target}"]`);
  expect(config).toContain(`- targets: ["${fillerTarget}"]`);
  writeFileSync(`${dir}/prometheus.yml`, config);
  const rules = rulesText.replaceAll("[1m]", `[${WINDOW}]`).replaceAll("[5m]", `[${WINDOW}]`);
  expect(rules).not.toBe(rulesText);
  writeFileSync(`${dir}/cdr-worker.rules.yml`, rules);
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  // As compose runs it: the docs' address from the environment into the external labels.
  prometheus = Bun.spawn(
    ["prometheus", `--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`,
      "--enable-feature=expand-external-labels"],
    { stdout: "ignore", stderr: "ignore", env: { ...process.env, CDRWORKER_DOCS_URL: DOCS_URL } },
  );
  await waitFor(async () => ((await fetch(`${api}/-/ready`).catch(() => null))?.status === 200 ? true : undefined), 30_000, "Prometheus ready");
  // The paced stream: RATE records a second for SECONDS, one in INVALID_EVERY with a bad rat.
  const p = new Producer(props);
  try {
    // The stream starts once the worker delivers: one that has just joined inserts only after its
    // first heartbeat is proven (docs/internals.md), and the rules are held to the steady stream.
    await p.produce(n.raw, toJson(withFields({ raw_id: "prom-first" })));
    await statsWhen(worker, (s) => s.total_clickhouse >= 1, 30_000, "the worker delivering");
    for (let s = 0; s < SECONDS * 10; s++) {
      const started = Date.now();
      const batch = Array.from({ length: RATE / 10 }, (_, k) => {
        const i = s * (RATE / 10) + k;
        return toJson(withFields({ raw_id: `prom-${i}`, ...(i % INVALID_EVERY === 0 ? { rat: 4 } : {}) }));
      });
      await p.produceBatch(n.raw, batch);
      await Bun.sleep(Math.max(0, 100 - (Date.now() - started)));
    }
  } finally {
    p.close();
  }
  await waitFor(async () => ((await query("cdr_worker:records_processed:rate1m")).length > 0 ? true : undefined), 20_000, "recording rules evaluated");
  // The findings are exported once a scheduled audit has ended; one that began while the stream
  // ran was seen to end only after it, 10 s later, on a 2-core machine.
  await waitFor(async () => ((await query("cdr_worker_audit_findings")).length > 0 ? true : undefined), 90_000, "a scheduled audit scraped");
}, 150_000);

afterAll(async () => {
  prometheus?.kill();
  await prometheus?.exited;
  if (worker) await worker.stop();
  if (filler) await filler.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("Prometheus scrapes the worker: the target is up", async () => {
  const up = await query('up{job="cdr-worker"}');
  expect(up.map((s) => s.value[1])).toEqual(["1"]);
});

test("the runbook links are absolute: the docs' address comes from the environment into the external labels", async () => {
  // Federation exports series with the external labels the alerts' annotations read.
  const federated = await (await fetch(`${api}/federate?match[]=up`)).text();
  expect(federated).toContain(`cdrworker_docs="${DOCS_URL}"`);
});

test("every metric the rules and the dashboard name exists in the scrape", async () => {
  const names = metricNames(rulesText + dashboardExprs.map((d) => d.expr).join("\n"));
  expect(names.length).toBeGreaterThan(10);
  const missing: string[] = [];
  for (const name of names) {
    const series = await query(`count({__name__=~"${name}(_bucket)?"})`);
    if (series.length === 0) missing.push(name);
  }
  await explainedBy(worker, async () => expect(missing).toEqual([]));
});

test("the recording rules evaluate to the stream that was sent: records/s and the DLQ ratio", async () => {
  const rate = Number((await query("cdr_worker:records_processed:rate1m"))[0]!.value[1]);
  expect(rate).toBeGreaterThan(RATE * 0.75);
  expect(rate).toBeLessThan(RATE * 1.25);
  const ratio = Number((await query("cdr_worker:dlq_ratio:rate5m"))[0]!.value[1]);
  expect(ratio).toBeGreaterThan(1 / INVALID_EVERY - 0.03);
  expect(ratio).toBeLessThan(1 / INVALID_EVERY + 0.03);
  const p99 = Number((await query("cdr_worker:end_to_end_latency_seconds:p99"))[0]!.value[1]);
  expect(p99).toBeGreaterThan(0);
  expect(p99).toBeLessThan(5);
});

test("every dashboard query parses and returns a series", async () => {
  expect(dashboardExprs.length).toBeGreaterThanOrEqual(12);
  const empty: string[] = [];
  for (const { panel, expr } of dashboardExprs) if ((await query(expr)).length === 0) empty.push(`${panel}: ${expr}`);
  expect(empty).toEqual([]);
});

test("the scrape passes promtool check metrics (Prometheus naming conventions)", async () => {
  const scrape = await (await fetch(`${worker.statsUrl}/metrics`)).text();
  const r = Bun.spawnSync(["promtool", "check", "metrics"], { stdin: new Blob([scrape]), stdout: "pipe", stderr: "pipe" });
  expect(`${r.stdout}${r.stderr}`.trim()).toBe("");
  expect(r.exitCode).toBe(0);
});

test("the manual's metric list (docs/operations.md) is exactly what the worker exports: names, types and labels", async () => {
  await statsWhen(worker, (s) => s.last_audit !== null, 30_000, "a scheduled audit ran");
  const scrape = await (await fetch(`${worker.statsUrl}/metrics`)).text();
  const exported = new Map<string, { type: string; labels: Set<string> }>();
  for (const m of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) exported.set(m[1]!, { type: m[2]!, labels: new Set() });
  for (const line of scrape.split("\n")) {
    const m = /^([a-z_:]+?)(_bucket|_sum|_count)?\{([^}]*)\}/.exec(line);
    if (!m) continue;
    const family = exported.has(m[1]! + (m[2] ?? "")) ? m[1]! + (m[2] ?? "") : m[1]!;
    for (const l of m[3]!.matchAll(/(\w+)="/g)) if (l[1] !== "le") exported.get(family)?.labels.add(l[1]!);
  }
  const readme = readFileSync(`${ROOT}/docs/operations.md`, "utf8");
  const section = readme.slice(readme.indexOf("## Metrics"), readme.indexOf("\n## ", readme.indexOf("## Metrics") + 5));
  const documented = new Map<string, { type: string; labels: string }>();
  for (const m of section.matchAll(/^\| `([a-z_]+)` \| (\w+) \| ([^|]*) \|/gm)) documented.set(m[1]!, { type: m[2]!, labels: m[3]!.trim() });
  expect([...documented.keys()].sort()).toEqual([...exported.keys()].sort());
  for (const [name, e] of exported) {
    const d = documented.get(name)!;
    expect(`${name}: ${d.type} ${d.labels}`).toBe(`${name}: ${e.type} ${[...e.labels].sort().map((l) => `\`${l}\``).join(", ") || "—"}`);
  }
});

test("Prometheus scrapes the DLQ table's filler: up, and every DLQ record stored, the table caught up", async () => {
  const up = await query('up{job="cdr-worker-dlq-fill"}');
  expect(up.map((s) => s.value[1])).toEqual(["1"]);
  const dead = (await worker.stats()).total_dlq as number;
  expect(dead).toBe(SECONDS * RATE / INVALID_EVERY);
  await waitFor(async () => {
    const stored = await query('cdr_worker_dlq_table_rows_stored_total{job="cdr-worker-dlq-fill"}');
    const behind = await query('max(cdr_worker_dlq_table_lag_records{job="cdr-worker-dlq-fill"})');
    return Number(stored[0]?.value[1]) === dead && Number(behind[0]?.value[1]) === 0 ? true : undefined;
  }, 30_000, "the DLQ table filled and scraped caught up");
  const scrape = await (await fetch(`${filler.statsUrl}/metrics`)).text();
  const r = Bun.spawnSync(["promtool", "check", "metrics"], { stdin: new Blob([scrape]), stdout: "pipe", stderr: "pipe" });
  expect(`${r.stdout}${r.stderr}`.trim()).toBe("");
  // docs/dlq.md's table is what it exports: names and types.
  const exported = [...scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
  const doc = readFileSync(`${ROOT}/docs/dlq.md`, "utf8");
  const documented = [...doc.matchAll(/^\| `(cdr_worker_dlq_table_[a-z_]+)` \| (\w+) \|/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
  expect(documented).toEqual(exported);
});
