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

test("the PodMonitor scrapes the worker's and the DLQ table filler's pods on their stats port, under the job names the rules read", () => {
  const monitor = one(operator, "PodMonitor").spec;
  expect(monitor.podMetricsEndpoints.map((e: { port: string; path: string }) => [e.port, e.path])).toEqual([["stats", "/metrics"]]);
  const [selects] = monitor.selector.matchExpressions;
  expect(monitor.selector.matchLabels).toBeUndefined();
  const rules = readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8");
  const jobs = [];
  for (const deployment of [one(rendered(), "Deployment"), one(rendered(`${ROOT}/deploy/kubernetes/dlq-fill`), "Deployment")]) {
    const labels = deployment.spec.template.metadata.labels;
    expect(selects).toMatchObject({ key: "app.kubernetes.io/name", operator: "In" });
    expect(selects.values).toContain(labels[selects.key]);
    expect(deployment.spec.template.spec.containers[0].ports.map((p: { name: string }) => p.name)).toContain("stats");
    // The job label is that pod label's value, as the rules name it.
    jobs.push(labels[monitor.jobLabel]);
  }
  expect(jobs).toEqual(["cdr-worker", "cdr-worker-dlq-fill"]);
  expect(rules).toContain('job="cdr-worker"');
  expect(rules).toContain("job cdr-worker-dlq-fill");
});
