// The shipped Kubernetes manifests run for real: Debian's podman plays the Deployment that kustomize
// renders, through a test overlay that points it at the local Kafka and ClickHouse, one replica on
// the host's network, and the Secret's files from a host directory (podman 4.3 mounts no Secret
// volume and has no Job kind: the Jobs' containers run with `podman run`, as rendered). Records are
// stored; `podman kube down` stops the worker within its deadline.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { relative } from "node:path";
import { one, rendered } from "../support/kustomize.ts";
import { deleteTopics } from "../support/kafka.ts";
import { CLICKHOUSE_URL, clickhouse, freePort, KAFKA_BROKERS, ROOT, run, uniqueName, waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";

setDefaultTimeout(60_000);

const TAG = "localhost/cdr-worker:kube";
const PODMAN_ENV = { ...process.env, CONTAINERS_CONF: `${ROOT}/scripts/image/containers.conf` } as Record<string, string>;
async function podman(...args: string[]): Promise<string> {
  // Not from the checkout: `kube play` builds an image from a path of the image's name under its
  // working directory, and ./cdr-worker (the binary `bun run build` makes) is such a path.
  const p = Bun.spawn(["podman", ...args], { env: PODMAN_ENV, cwd: tmpdir(), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`podman ${args.join(" ")} exited ${code}: ${err}`);
  return out;
}

const dir = mkdtempSync(`${tmpdir()}/cdr-kube-play-`);
const n = { raw: uniqueName("kube.raw"), dlq: uniqueName("kube.dlq"), group: uniqueName("kube-g"), table: uniqueName("kube").replace(/\W/g, "_") };
const ch = clickhouse();
let statsPort = 0;

beforeAll(async () => {
  await run(["bash", `${ROOT}/scripts/image/build.sh`, TAG]);
  statsPort = await freePort();
}, 1_800_000);

afterAll(async () => {
  await podman("kube", "down", `${dir}/deployment.yaml`).catch(() => {});
  for (const t of [`${n.table}_offsets_mv`, `${n.table}_offsets`, n.table]) await ch.command({ query: `DROP TABLE IF EXISTS e2e.${t}` }).catch(() => {});
  await ch.close();
  await deleteTopics(n.raw, n.dlq).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The test overlay: the shipped base, pointed here, its Secret a host directory, one replica on the
 * host's network (the local broker advertises 127.0.0.1), its stats port a free one of the host's.
 */
function overlay(secrets: string): string {
  const literals = {
    KAFKA_BROKERS, CLICKHOUSE_URL, KAFKA_TOPIC_RAW: n.raw, KAFKA_TOPIC_DLQ: n.dlq, KAFKA_GROUP_ID: n.group,
    CLICKHOUSE_DATABASE: "e2e", CLICKHOUSE_TABLE: n.table, CLICKHOUSE_USER: "default", STATS_PORT: String(statsPort),
    STATS_HOST: "127.0.0.1", BATCH_FLUSH_INTERVAL_SECONDS: "0.5",
  };
  return `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [${relative(`${dir}/overlay`, `${ROOT}/deploy/kubernetes`)}]
images: [{ name: cdr-worker, newName: ${TAG.split(":")[0]}, newTag: ${TAG.split(":")[1]} }]
configMapGenerator:
  - name: cdr-worker
    behavior: merge
    literals: [${Object.entries(literals).map(([k, v]) => JSON.stringify(`${k}=${v}`)).join(", ")}]
patches:
  - target: { kind: Deployment }
    patch: |
      - { op: replace, path: /spec/replicas, value: 1 }
      - { op: add, path: /spec/template/spec/hostNetwork, value: true }
      - { op: replace, path: /spec/template/spec/volumes/0, value: { name: secrets, hostPath: { path: ${secrets}, type: Directory } } }
      # On the host's network podman maps no ports: the stats port is the host's own, named by number.
      - { op: remove, path: /spec/template/spec/containers/0/ports }
${["livenessProbe", "readinessProbe", "startupProbe"].map((p) => `      - { op: replace, path: /spec/template/spec/containers/0/${p}/httpGet/port, value: ${statsPort} }`).join("\n")}
`;
}

test("podman plays the rendered Deployment against the local services: records stored, kube down stops the worker", async () => {
  const secrets = `${dir}/secrets`;
  await run(["mkdir", "-p", secrets, `${dir}/overlay`]);
  writeFileSync(`${secrets}/clickhouse-worker-password`, "");
  writeFileSync(`${secrets}/dlq-provenance-key`, "kube-play-provenance-key-0123456789abcdef0123");
  for (const f of ["clickhouse-worker-password", "dlq-provenance-key"]) chmodSync(`${secrets}/${f}`, 0o644);
  writeFileSync(`${dir}/overlay/kustomization.yaml`, overlay(secrets));
  const docs = rendered(`${dir}/overlay`);
  const configMap = one(docs, "ConfigMap");
  const deployment = one(docs, "Deployment");
  writeFileSync(`${dir}/configmap.yaml`, Bun.YAML.stringify(configMap));
  writeFileSync(`${dir}/deployment.yaml`, Bun.YAML.stringify(deployment));
  // The Jobs' containers as rendered, with the ConfigMap's environment: the topics, then the table
  // (18.16 has no roles: migrate without --role, as its docs say).
  const env = [
    ...Object.entries(configMap.data as Record<string, string>).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
    "--volume", `${secrets}:/run/secrets/cdr-worker:ro`,
  ];
  const jobs = rendered(`${ROOT}/deploy/kubernetes/jobs`);
  const topicsArgs = one(jobs, "Job", "cdr-worker-topics").spec.template.spec.containers[0].args as string[];
  await podman("run", "--rm", "--network", "host", ...env, TAG, ...topicsArgs.filter((a, i, all) => a !== "--replication-factor" && all[i - 1] !== "--replication-factor"));
  await podman("run", "--rm", "--network", "host", ...env, TAG, "migrate");
  const { valid, invalid } = await produceSynthetic(n.raw, 3000, 0.05, 91);
  await podman("kube", "play", "--configmap", `${dir}/configmap.yaml`, `${dir}/deployment.yaml`);
  const count = async () => Number((await (await ch.query({ query: `SELECT count() AS c FROM e2e.${n.table}`, format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);
  await waitFor(async () => ((await count()) === valid ? true : undefined), 120_000, "every valid record stored by the played pod");
  // The DLQ's envelopes are acknowledged with their transaction, after the rows (a commit at most
  // every 100 ms): the worker's own count says when both are durable.
  const stats = async () => (await (await fetch(`http://127.0.0.1:${statsPort}/internal/stats`)).json()) as Record<string, any>;
  const s = await waitFor(async () => {
    const s = await stats();
    return s.total_dlq === invalid ? s : undefined;
  }, 60_000, "every invalid record dead-lettered by the played pod");
  expect([s.total_clickhouse, s.total_dlq]).toEqual([valid, invalid]);
  expect(await (await fetch(`http://127.0.0.1:${statsPort}/runningz`)).json()).toMatchObject({ status: "running" });
  const t0 = performance.now();
  await podman("kube", "down", `${dir}/deployment.yaml`);
  expect((performance.now() - t0) / 1000).toBeLessThan(deployment.spec.template.spec.terminationGracePeriodSeconds);
  expect(await count()).toBe(valid);
}, 600_000);
