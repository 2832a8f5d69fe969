#!/usr/bin/env bun
/**
 * deploy/kubernetes/prometheus-operator/prometheusrule.yaml, generated from the one rules file
 * (deploy/prometheus/cdr-worker.rules.yml): the same groups, as a PrometheusRule the Prometheus
 * Operator loads. test/deploy/prometheus-operator.test.ts holds the two equal.
 *   bun scripts/kubernetes/prometheus-rule.ts            (rewrites the file)
 *   bun scripts/kubernetes/prometheus-rule.ts --stdout   (prints it)
 */
import { readFileSync, writeFileSync } from "node:fs";

const ROOT = new URL("../..", import.meta.url).pathname;
export const RULE_FILE = `${ROOT}deploy/kubernetes/prometheus-operator/prometheusrule.yaml`;

export function prometheusRule(): string {
  const rules = readFileSync(`${ROOT}deploy/prometheus/cdr-worker.rules.yml`, "utf8");
  const groups = rules.slice(rules.indexOf("\ngroups:") + 1);
  const indented = groups.split("\n").map((l) => (l ? `  ${l}` : l)).join("\n");
  return `# Generated from deploy/prometheus/cdr-worker.rules.yml by scripts/kubernetes/prometheus-rule.ts: edit
# that file, then run the script. The rules and their runbook links are described there and in
# docs/runbooks.md; set the Prometheus resource's externalLabels.cdrworker_docs to this release's docs/.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: cdr-worker
  labels:
    app.kubernetes.io/name: cdr-worker
spec:
${indented}`;
}

if (import.meta.main) {
  if (process.argv.includes("--stdout")) process.stdout.write(prometheusRule());
  else writeFileSync(RULE_FILE, prometheusRule());
}
