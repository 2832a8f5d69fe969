// deploy/kubernetes/ checked offline against Kubernetes' own schemas (PyPI's kubernetes-validate,
// strict: an unknown field is an error), and held to the code it depends on: the memory request to
// the bound the worker exports at the ConfigMap's settings, the grace period to its shutdown
// deadline, the probes to the stats server's paths, the user to the image's.
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { loadConfig, shutdownBelowBudget } from "../../src/config.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { VERSION } from "../../src/version.ts";
import { productionProfile } from "../support/profile.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const DIR = `${ROOT}/deploy/kubernetes`;
const VALIDATE = `${ROOT}/.local/kubernetes-validate/bin/kubernetes-validate`;
const files = () =>
  readdirSync(DIR, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".yaml"))
    .map((f) => `${DIR}/${f}`);
const manifest = (name: string) => Bun.YAML.parse(readFileSync(`${DIR}/${name}`, "utf8")) as any;

function validate(paths: string[]) {
  const p = Bun.spawnSync([VALIDATE, "--strict", "--no-warn", ...paths], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
}

test("every manifest validates strictly against Kubernetes' schemas; a field misspelled in a copy does not", () => {
  const all = files();
  expect(all.map((f) => f.slice(DIR.length + 1)).sort()).toEqual(["check/job.yaml", "configmap.yaml", "deployment.yaml", "poddisruptionbudget.yaml"]);
  const good = validate(all);
  expect(good.code).toBe(0);
  for (const f of all) expect(good.out).toContain(`${f} passed`);

  const dir = mkdtempSync(`${tmpdir()}/cdr-k8s-`);
  try {
    const copy = `${dir}/deployment.yaml`;
    writeFileSync(copy, readFileSync(`${DIR}/deployment.yaml`, "utf8").replace("terminationGracePeriodSeconds:", "terminationGracePeriod:"));
    const bad = validate([copy]);
    expect(bad.code).not.toBe(0);
    expect(bad.out).toContain("terminationGracePeriod");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Kubernetes' binary quantities: 288Mi, 1Gi. */
function bytes(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (!m) throw new Error(`not a binary quantity: ${quantity}`);
  return Number(m[1]) * { "": 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[m[2] ?? ""]!;
}

test("the Deployment is held to the worker: memory bound, shutdown deadline, probes, secrets, user", () => {
  const data = manifest("configmap.yaml").data as Record<string, string>;
  // The ConfigMap loads as it is, with the Secret's files where the pod mounts them.
  const dir = mkdtempSync(`${tmpdir()}/cdr-k8s-secrets-`);
  const mounted = { ...data };
  for (const [name, secret] of [["CLICKHOUSE_PASSWORD_FILE", "password"], ["DLQ_PROVENANCE_KEY_FILE", "k".repeat(64)]] as const) {
    mounted[name] = `${dir}/${data[name]!.split("/").pop()}`;
    writeFileSync(mounted[name]!, secret);
  }
  const cfg = loadConfig(mounted);
  rmSync(dir, { recursive: true, force: true });
  const pod = manifest("deployment.yaml").spec.template.spec;
  const [c] = pod.containers;
  const bound = memoryBoundBytes(cfg.batch, cfg.phone.cacheSize);
  expect(bytes(c.resources.requests.memory)).toBeGreaterThanOrEqual(bound);
  expect(bytes(c.resources.limits.memory)).toBeGreaterThan(bytes(c.resources.requests.memory));
  // The production profile, as deploy/production.env holds it; the stop deadline its own default.
  expect(data).toMatchObject(productionProfile());
  expect(data.SHUTDOWN_TIMEOUT_SECONDS).toBeUndefined();
  expect(shutdownBelowBudget(cfg)).toBeNull();
  // The worker's deadline ends a stop before the kubelet's SIGKILL would.
  expect(pod.terminationGracePeriodSeconds).toBe(cfg.shutdownTimeoutMs / 1000 + 10);
  expect(c.livenessProbe.httpGet.path).toBe("/healthz");
  expect(c.readinessProbe.httpGet.path).toBe("/runningz");
  expect(c.ports[0].containerPort).toBe(8081);
  expect(readFileSync(`${ROOT}/Dockerfile`, "utf8")).toMatch(/^ENV .*STATS_HOST=0\.0\.0\.0 STATS_PORT=8081/m);
  // Secrets as files, under the mount.
  const mount = c.volumeMounts.find((m: { name: string }) => m.name === "secrets").mountPath;
  for (const v of ["CLICKHOUSE_PASSWORD_FILE", "DLQ_PROVENANCE_KEY_FILE"]) expect(data[v]).toStartWith(`${mount}/`);
  expect(Object.keys(data).filter((k) => /PASSWORD$|KEY$/.test(k))).toEqual([]);
  // Non-root, read-only, nothing gained: distroless's nonroot is uid 65532.
  expect(readFileSync(`${ROOT}/Dockerfile`, "utf8")).toMatch(/^USER nonroot$/m);
  expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
  expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
  expect(manifest("deployment.yaml").spec.template.metadata.annotations).toMatchObject({
    "prometheus.io/scrape": "true",
    "prometheus.io/port": "8081",
  });
  const pdb = manifest("poddisruptionbudget.yaml").spec;
  expect(pdb.selector).toEqual(manifest("deployment.yaml").spec.selector);
});

test("the check Job runs `check` in the Deployment's pod: same environment, secrets, image and security", () => {
  const worker = manifest("deployment.yaml").spec.template.spec;
  const job = manifest("check/job.yaml").spec.template.spec;
  const [w] = worker.containers;
  const [c] = job.containers;
  expect(c.args).toEqual(["check"]);
  expect(w.image).toBe(`cdr-worker:${VERSION}`);
  expect(job.restartPolicy).toBe("Never");
  for (const k of ["image", "envFrom", "volumeMounts", "securityContext"]) expect({ [k]: c[k] }).toEqual({ [k]: w[k] });
  for (const k of ["volumes", "securityContext", "automountServiceAccountToken"]) expect({ [k]: job[k] }).toEqual({ [k]: worker[k] });
});
