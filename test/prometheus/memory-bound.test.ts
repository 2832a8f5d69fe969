// The memory alert holds at every batch size docs/sizing.md documents and at the defaults: a worker at
// its documented RSS stays quiet, one at its bound pages. The bound is the worker's own metric,
// computed from its settings (src/stats/memory-bound.ts); promtool evaluates the shipped rule.
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { loadConfig } from "../../src/config.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const MiB = 1024 * 1024;

test("CdrWorkerMemoryNearBound: quiet at the documented RSS for each documented BATCH_SIZE and at the defaults, firing at the bound", async () => {
  const readme = await Bun.file(`${ROOT}/docs/sizing.md`).text();
  const row = /^\| memory per worker \| (.*?) \|/m.exec(readme)![1]!;
  // "≈240 MiB at `BATCH_SIZE` 10000, ≈170 MiB at 1000"
  const documented = [...row.matchAll(/≈(\d+) MiB at (?:`BATCH_SIZE` )?(\d+)/g)].map((m) => ({ rssMiB: Number(m[1]), batchSize: Number(m[2]) }));
  expect(documented.length).toBeGreaterThanOrEqual(2);
  const defaults = loadConfig({}).batch;
  expect(documented.some((d) => d.batchSize === defaults.size)).toBe(true);

  const series: string[] = [];
  const firing: string[] = [];
  documented.forEach(({ rssMiB, batchSize }, i) => {
    const c = loadConfig({ BATCH_SIZE: String(batchSize) });
    const bound = memoryBoundBytes(c.batch, c.phone.cacheSize);
    expect(rssMiB * MiB).toBeLessThan(bound); // the documented RSS is within the bound at all
    const quiet = `q${i}`, paging = `p${i}`;
    for (const [instance, rss] of [[quiet, rssMiB * MiB], [paging, bound]] as const) {
      series.push(`      - { series: 'process_resident_memory_bytes{job="cdr-worker",instance="${instance}"}', values: '${Math.round(rss)}x20' }`);
      series.push(`      - { series: 'cdr_worker_memory_bound_bytes{job="cdr-worker",instance="${instance}"}', values: '${bound}x20' }`);
    }
    // Prometheus's humanize1024: four significant digits of the largest binary unit.
    const human = `${Number((bound / MiB).toPrecision(4))}Mi`;
    firing.push(`          - exp_labels: { severity: warning, job: cdr-worker, instance: ${paging} }`);
    firing.push(`            exp_annotations: { summary: "cdr-worker ${paging} uses ${human}B, over 90 % of the memory bound its settings give", runbook_url: "docs/runbooks.md#cdrworkermemorynearbound" }`);
  });
  const dir = `${ROOT}/.local/promtool`;
  mkdirSync(dir, { recursive: true });
  const file = `${dir}/memory-bound.test.yml`;
  await Bun.write(file, [
    "rule_files:",
    `  - ${ROOT}/deploy/prometheus/cdr-worker.rules.yml`,
    "evaluation_interval: 1m",
    "tests:",
    "  - interval: 1m",
    "    external_labels: { cdrworker_docs: docs }",
    "    input_series:",
    ...series,
    "    alert_rule_test:",
    "      - eval_time: 15m",
    "        alertname: CdrWorkerMemoryNearBound",
    "        exp_alerts:",
    ...firing,
    "",
  ].join("\n"));
  const r = Bun.spawnSync(["promtool", "test", "rules", file], { stdout: "pipe", stderr: "pipe" });
  const out = `${r.stdout}${r.stderr}`;
  expect(out).toContain("SUCCESS");
  expect(r.exitCode).toBe(0);
});

test("the exported bound is the one the settings give: about 280 MiB at the defaults, more for larger batches", () => {
  const bound = (env: Record<string, string>) => {
    const c = loadConfig(env);
    return memoryBoundBytes(c.batch, c.phone.cacheSize);
  };
  expect(bound({})).toBe((160 + 3 * 32) * MiB + 50_000 * 512);
  expect(Math.round(bound({}) / MiB)).toBe(280);
  expect(bound({ BATCH_SIZE: "10000" })).toBeGreaterThan(bound({}));
  expect(bound({ BATCH_MAX_BYTES: String(64 * MiB) })).toBe((160 + 3 * 128) * MiB + 50_000 * 512);
});

test("PHONE_CACHE_SIZE counts in the bound: a larger cache raises it by 512 bytes a verdict, so raising it does not fire the alert", () => {
  const at = (size: string) => {
    const c = loadConfig({ PHONE_CACHE_SIZE: size });
    return memoryBoundBytes(c.batch, c.phone.cacheSize);
  };
  expect(at("500000") - at("50000")).toBe(450_000 * 512);
  // The defaults' bound is what docs/sizing.md gives: about 280 MiB.
  const d = loadConfig({});
  expect(Math.round(memoryBoundBytes(d.batch, d.phone.cacheSize) / MiB)).toBe(280);
});
