// The production profile as deploy/kubernetes/config/production.env holds it: what the shipped
// deployments set (the Kubernetes ConfigMap is made from it, compose reads it).
import { readFileSync } from "node:fs";
import { ROOT } from "./services.ts";

export function productionProfile(): Record<string, string> {
  const lines = readFileSync(`${ROOT}/deploy/kubernetes/config/production.env`, "utf8").split("\n");
  return Object.fromEntries(lines.filter((l) => /^[A-Z][A-Z0-9_]*=/.test(l)).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
}
