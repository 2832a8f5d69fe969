// deploy/kubernetes/prometheus-operator/: a PodMonitor and a PrometheusRule for the Prometheus
// Operator. No CRD schema is at hand offline, so they are held to what they stand for instead: the
// PrometheusRule is the rules file, generated (and promtool checks it); the PodMonitor scrapes the
// Deployment's pods on their stats port under the job name the rules read.
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { prometheusRule, RULE_FILE } from "../../scripts/kubernetes/prometheus-rule.ts";
import { one, rendered } from "../support/kustomize.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const operator = rendered(`${ROOT}/deploy/kubernetes/prometheus-operator`);
const rulesFile = Bun.YAML.parse(readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8")) as { groups: unknown[] };

test("the PrometheusRule is the rules file, as generated (regenerate: bun scripts/kubernetes/prometheus-rule.ts), and promtool accepts it", () => {
  expect(readFileSync(RULE_FILE, "utf8")).toBe(prometheusRule());
  expect((Bun.YAML.parse(readFileSync(RULE_FILE, "utf8")) as any).spec.groups).toEqual(rulesFile.groups);
  // As kustomize hands it to the cluster (it writes the folded expressions its own way).
  const rule = one(operator, "PrometheusRule");
  expect(rule.spec.groups[0].rules.map((r: { alert?: string; record?: string }) => r.alert ?? r.record)).toEqual(
    (rulesFile.groups[0] as any).rules.map((r: { alert?: string; record?: string }) => r.alert ?? r.record),
  );
  const dir = mkdtempSync(`${tmpdir()}/cdr-prometheusrule-`);
  try {
    writeFileSync(`${dir}/rules.yml`, Bun.YAML.stringify({ groups: rule.spec.groups }));
    const r = Bun.spawnSync(["promtool", "check", "rules", `${dir}/rules.yml`], { stdout: "pipe", stderr: "pipe" });
    expect(`${r.stdout}${r.stderr}`).toContain("SUCCESS");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the PodMonitor scrapes the worker's pods on their stats port, under the job name the rules read", () => {
  const monitor = one(operator, "PodMonitor").spec;
  const deployment = one(rendered(), "Deployment");
  expect(monitor.selector).toEqual(deployment.spec.selector);
  const ports = deployment.spec.template.spec.containers[0].ports.map((p: { name: string }) => p.name);
  expect(monitor.podMetricsEndpoints.map((e: { port: string; path: string }) => [e.port, e.path])).toEqual([["stats", "/metrics"]]);
  expect(ports).toContain("stats");
  // The job label is that pod label's value, which CdrWorkerDown and CdrWorkerNoneConsuming name.
  const job = deployment.spec.template.metadata.labels[monitor.jobLabel];
  expect(job).toBe("cdr-worker");
  expect(readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8")).toContain(`job="${job}"`);
});
