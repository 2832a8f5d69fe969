// deploy/kubernetes/ rendered as `kubectl apply -k` renders it, with the provisioned kustomize.
import { ROOT } from "./services.ts";

export const KUSTOMIZE = `${ROOT}/.local/kustomize/bin/kustomize`;

/** The documents `kustomize build` makes of a directory (deploy/kubernetes by default, or below it). */
export function rendered(dir = `${ROOT}/deploy/kubernetes`): any[] {
  return renderedText(dir).split(/^---$/m).map((d) => Bun.YAML.parse(d)).filter(Boolean);
}

export function renderedText(dir: string): string {
  const p = Bun.spawnSync([KUSTOMIZE, "build", dir], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`kustomize build ${dir}: ${p.stderr}`);
  return `${p.stdout}`;
}

/** The one document of `kind` (and `name`, when several) among rendered documents. */
export function one(docs: any[], kind: string, name?: string): any {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
  if (found.length !== 1) throw new Error(`${found.length} ${kind}${name ? ` ${name}` : ""} rendered`);
  return found[0];
}
