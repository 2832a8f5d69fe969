// deploy/kubernetes/ rendered by kustomize as `kubectl apply -k` renders it (the worker, its Jobs,
// its CronJobs), checked offline against Kubernetes' own schemas (PyPI's kubernetes-validate, strict:
// an unknown field is an error), and held to the code it depends on: the memory request to the
// bound the worker exports at the ConfigMap's settings, the grace period to its shutdown deadline,
// the probes to the stats server's paths, the user to the image's; every Job's pod to the worker's.
import { expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { loadConfig, shutdownBelowBudget } from "../../src/config.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { VERSION } from "../../src/version.ts";
import { one, rendered, renderedText } from "../support/kustomize.ts";
import { productionProfile } from "../support/profile.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const DIR = `${ROOT}/deploy/kubernetes`;
const VALIDATE = `${ROOT}/.local/kubernetes-validate/bin/kubernetes-validate`;
const KUSTOMIZATIONS = ["", "jobs", "cronjobs", "dlq-replay", "dlq-fill"];

function validate(paths: string[]) {
  const p = Bun.spawnSync([VALIDATE, "--strict", "--no-warn", ...paths], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
}

test("the worker, its Jobs and its CronJobs render and validate strictly against Kubernetes' schemas; a field misspelled does not", () => {
  const dir = mkdtempSync(`${tmpdir()}/cdr-k8s-`);
  try {
    const files = KUSTOMIZATIONS.map((k) => {
      const file = `${dir}/${k || "worker"}.yaml`;
      writeFileSync(file, renderedText(`${DIR}/${k}`));
      return file;
    });
    const good = validate(files);
    expect(good.code).toBe(0);
    const kinds = [...good.out.matchAll(/passed for resource (\w+)\//g)].map((m) => m[1]).sort();
    expect([...new Set(kinds)]).toEqual(["configmap", "cronjob", "deployment", "job", "networkpolicy", "poddisruptionbudget"]);
    const copy = `${dir}/copy`;
    cpSync(DIR, copy, { recursive: true });
    writeFileSync(`${copy}/deployment.yaml`, readFileSync(`${DIR}/deployment.yaml`, "utf8").replace("terminationGracePeriodSeconds:", "terminationGracePeriod:"));
    writeFileSync(`${dir}/bad.yaml`, renderedText(copy));
    const bad = validate([`${dir}/bad.yaml`]);
    expect(bad.code).not.toBe(0);
    expect(bad.out).toContain("terminationGracePeriod");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an edit of the ConfigMap's settings renames it, so the pods roll over to it (the worker reads its environment at start)", () => {
  const dir = mkdtempSync(`${tmpdir()}/cdr-k8s-edit-`);
  try {
    cpSync(DIR, dir, { recursive: true });
    writeFileSync(`${dir}/config/worker.env`, readFileSync(`${dir}/config/worker.env`, "utf8").replace("LOG_LEVEL=info", "LOG_LEVEL=debug"));
    const ref = (docs: any[]) => one(docs, "Deployment").spec.template.spec.containers[0].envFrom[0].configMapRef.name;
    const [before, after] = [ref(rendered(DIR)), ref(rendered(dir))];
    expect(before).toStartWith("cdr-worker-");
    expect(after).toStartWith("cdr-worker-");
    expect(after).not.toBe(before);
    expect(one(rendered(DIR), "ConfigMap").metadata.name).toBe(before);
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
  const docs = rendered(DIR);
  const data = one(docs, "ConfigMap").data as Record<string, string>;
  // The ConfigMap loads as it is, with the Secret's files where the pod mounts them.
  const dir = mkdtempSync(`${tmpdir()}/cdr-k8s-secrets-`);
  const mounted = { ...data };
  for (const [name, secret] of [["CLICKHOUSE_PASSWORD_FILE", "password"], ["DLQ_PROVENANCE_KEY_FILE", "k".repeat(64)]] as const) {
    mounted[name] = `${dir}/${data[name]!.split("/").pop()}`;
    writeFileSync(mounted[name]!, secret);
  }
  const cfg = loadConfig(mounted);
  rmSync(dir, { recursive: true, force: true });
  const pod = one(docs, "Deployment").spec.template.spec;
  const [c] = pod.containers;
  const bound = memoryBoundBytes(cfg.batch, cfg.phone.cacheSize);
  expect(bytes(c.resources.requests.memory)).toBeGreaterThanOrEqual(bound);
  expect(bytes(c.resources.limits.memory)).toBeGreaterThan(bytes(c.resources.requests.memory));
  // The production profile, as config/production.env holds it; the stop deadline its own default.
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
  expect(one(docs, "Deployment").spec.template.metadata.annotations).toMatchObject({
    "prometheus.io/scrape": "true",
    "prometheus.io/port": "8081",
  });
  const pdb = one(docs, "PodDisruptionBudget").spec;
  expect(pdb.selector).toEqual(one(docs, "Deployment").spec.selector);
  // Only Prometheus reaches the stats port, the workers' and the DLQ table filler's.
  const policy = one(docs, "NetworkPolicy").spec;
  const filler = one(rendered(`${DIR}/dlq-fill`), "Deployment");
  for (const d of [one(docs, "Deployment"), filler])
    expect(policy.podSelector.matchExpressions).toEqual([
      { key: "app.kubernetes.io/name", operator: "In", values: expect.arrayContaining([d.spec.selector.matchLabels["app.kubernetes.io/name"]]) },
    ]);
  expect(policy.ingress).toEqual([{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } } }], ports: [{ protocol: "TCP", port: 8081 }] }]);
});

/** The DLQ table's own user and secrets, as the filler, audit and replay run them (docs/security.md). */
const DLQ_ENV = [
  { name: "CLICKHOUSE_USER", value: "cdr_dlq" },
  { name: "CLICKHOUSE_PASSWORD_FILE", value: "/run/secrets/cdr-dlq/clickhouse-dlq-password" },
  { name: "DLQ_PROVENANCE_KEY_FILE", value: "/run/secrets/cdr-dlq/dlq-provenance-key" },
];

test("the DLQ table's filler runs the worker's pod (image, ConfigMap, security) with `dlq fill` as the DLQ table's own user, its Secret alone, probed on its /healthz", () => {
  const worker = one(rendered(DIR), "Deployment").spec.template.spec;
  const filler = one(rendered(`${DIR}/dlq-fill`), "Deployment").spec.template.spec;
  const [w] = worker.containers;
  const [c] = filler.containers;
  expect(c.args).toEqual(["dlq", "fill"]);
  for (const k of ["image", "envFrom", "securityContext"]) expect({ [k]: c[k] }).toEqual({ [k]: w[k] });
  for (const k of ["securityContext", "automountServiceAccountToken"]) expect({ [k]: filler[k] }).toEqual({ [k]: worker[k] });
  // Its own user and Secret; the worker's Secret is not mounted, so its password is not there to read.
  expect(c.env).toEqual([...w.env, ...DLQ_ENV]);
  expect(filler.volumes.find((v: { name: string }) => v.name === "secrets").secret.secretName).toBe("cdr-dlq");
  expect(filler.volumes.map((v: { secret?: { secretName: string } }) => v.secret?.secretName)).not.toContain("cdr-worker");
  expect(c.volumeMounts.find((m: { name: string }) => m.name === "secrets").mountPath).toBe("/run/secrets/cdr-dlq");
  expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "stats" });
  // The stats port the probes name is the one the ConfigMap gives every process.
  expect(c.ports).toEqual(w.ports);
});

test("every Job and CronJob runs the worker's pod: its image, ConfigMap, secrets and security; migrate and pruning as the admin", () => {
  const worker = one(rendered(DIR), "Deployment").spec.template.spec;
  const [w] = worker.containers;
  expect(w.image).toBe(`cdr-worker:${VERSION}`);
  const jobs = [...rendered(`${DIR}/jobs`), ...rendered(`${DIR}/dlq-replay`)]
    .filter((d) => d.kind === "Job")
    .map((d) => [d.metadata.name, d.spec.template.spec] as const);
  const crons = rendered(`${DIR}/cronjobs`).filter((d) => d.kind === "CronJob").map((d) => [d.metadata.name, d.spec.jobTemplate.spec.template.spec] as const);
  expect([...jobs, ...crons].map(([name]) => name).sort()).toEqual([
    "cdr-worker-audit", "cdr-worker-check", "cdr-worker-dlq-replay", "cdr-worker-migrate", "cdr-worker-prune-dlq", "cdr-worker-prune-offsets", "cdr-worker-topics",
  ]);
  const args: Record<string, string[]> = {};
  for (const [name, pod] of [...jobs, ...crons]) {
    const [c] = pod.containers;
    args[name] = c.args;
    expect({ name, restartPolicy: pod.restartPolicy }).toEqual({ name, restartPolicy: "Never" });
    for (const k of ["image", "envFrom", "securityContext"]) expect({ name, [k]: c[k] }).toEqual({ name, [k]: w[k] });
    for (const k of ["securityContext", "automountServiceAccountToken"]) expect({ name, [k]: pod[k] }).toEqual({ name, [k]: worker[k] });
    // As the admin: its password from the Secret cdr-worker-admin, never the worker's.
    const admin = ["cdr-worker-migrate", "cdr-worker-prune-offsets", "cdr-worker-prune-dlq"].includes(name);
    // audit and replay as the DLQ table's own user, from the Secret cdr-dlq: the worker's is not
    // mounted, so its password is not there to read.
    const dlq = ["cdr-worker-audit", "cdr-worker-dlq-replay"].includes(name);
    const workerSecret = (v: { name: string }) => v.name === "secrets";
    for (const v of worker.volumes) if (!(dlq && workerSecret(v))) expect({ name, has: pod.volumes }).toEqual({ name, has: expect.arrayContaining([v]) });
    for (const m of w.volumeMounts) if (!(dlq && workerSecret(m))) expect(c.volumeMounts).toContainEqual(m);
    if (dlq) {
      expect({ name, secrets: pod.volumes.map((v: { secret?: { secretName: string } }) => v.secret?.secretName).filter(Boolean) }).toEqual({ name, secrets: ["cdr-dlq"] });
      expect(c.volumeMounts.map((m: { mountPath: string }) => m.mountPath)).not.toContain("/run/secrets/cdr-worker");
    }
    const user = (c.env ?? []).find((e: { name: string }) => e.name === "CLICKHOUSE_USER")?.value;
    expect({ name, user }).toEqual({ name, user: admin ? "default" : dlq ? "cdr_dlq" : undefined });
    if (admin) expect(pod.volumes).toContainEqual({ name: "admin", secret: { secretName: "cdr-worker-admin", defaultMode: 0o440 } });
    if (dlq) expect({ name, env: c.env }).toEqual({ name, env: DLQ_ENV });
    if (dlq || name === "cdr-worker-migrate") {
      expect(pod.volumes).toContainEqual({ name: "dlq-secrets", secret: { secretName: "cdr-dlq", defaultMode: 0o440 } });
      expect(c.volumeMounts).toContainEqual({ name: "dlq-secrets", mountPath: "/run/secrets/cdr-dlq", readOnly: true });
    }
  }
  // migrate makes both users, each from its own Secret's file.
  expect(args["cdr-worker-migrate"]).toEqual([
    "migrate", "--role", "cdr_worker", "--user", "cdr_worker", "--password-file", "/run/secrets/cdr-worker/clickhouse-worker-password",
    "--dlq-role", "cdr_dlq", "--dlq-user", "cdr_dlq", "--dlq-password-file", "/run/secrets/cdr-dlq/clickhouse-dlq-password",
  ]);
  expect(args["cdr-worker-topics"]).toEqual(["topics", "ensure", "--keep-configs", "--replication-factor", "3"]);
  // Started beside topics and migrate, it checks again until what they make is there (10 minutes at most).
  expect(args["cdr-worker-check"]).toEqual(["check", "--wait", "600"]);
  expect(args["cdr-worker-prune-offsets"]).toEqual(["migrate", "--prune-offsets"]);
  expect(args["cdr-worker-prune-dlq"]).toEqual(["migrate", "--prune-dlq"]);
  expect(args["cdr-worker-dlq-replay"]!.slice(0, 2)).toEqual(["dlq", "replay"]);
});
