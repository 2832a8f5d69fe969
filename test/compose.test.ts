// No Docker engine here: compose.yml is checked as data (what `docker compose config` would catch
// plus what this stack needs).
import { expect, setDefaultTimeout, test } from "bun:test";
import { loadConfig } from "../src/config.ts";
import { productionProfile } from "./support/profile.ts";
import { ROOT } from "./support/services.ts";

setDefaultTimeout(60_000);

test("compose.yml: Kafka (KRaft), ClickHouse, one-shot topics and migrate, the worker healthchecked on /readyz", async () => {
  const doc = Bun.YAML.parse(await Bun.file(`${ROOT}/compose.yml`).text()) as { services: Record<string, any> };
  const s = doc.services;
  const notCluster = Object.keys(s).filter((k) => !s[k].profiles?.includes("cluster"));
  expect(notCluster.sort()).toEqual(["clickhouse", "dlq-fill", "generator", "grafana", "kafka", "migrate", "prometheus", "topics", "worker"]);
  // The DLQ table's filler: the worker's hardening, the DLQ table's own user and secret (never the
  // worker's), healthchecked on its loop.
  expect(s["dlq-fill"].command).toEqual(["dlq", "fill"]);
  for (const k of ["env_file", "read_only", "cap_drop", "security_opt", "ulimits"]) expect({ [k]: s["dlq-fill"][k] }).toEqual({ [k]: s.worker[k] });
  expect(s["dlq-fill"].environment.CLICKHOUSE_USER).toBe("cdr_dlq");
  expect(s["dlq-fill"].environment.CLICKHOUSE_PASSWORD_FILE).toBe("/run/secrets/clickhouse-dlq-password");
  expect(s["dlq-fill"].secrets).toEqual(["clickhouse-dlq-password", "dlq-provenance-key"]);
  expect(s["dlq-fill"].healthcheck.test).toEqual(["CMD", "/usr/local/bin/cdr-worker", "probe", "http://127.0.0.1:8081/healthz"]);
  expect(s.kafka.image).toMatch(/^apache\/kafka:4\./);
  expect(s.kafka.environment.KAFKA_PROCESS_ROLES).toBe("broker,controller");
  expect(s.clickhouse.image).toMatch(/^clickhouse\/clickhouse-server:/);
  // An operator's topic configs survive every `up`: compose creates what is missing and keeps the rest.
  expect(s.topics.command).toEqual(["topics", "ensure", "--keep-configs"]);
  // migrate, as the admin, makes the worker's role and user and the DLQ table's; each logs in as its
  // own user, its password a file.
  expect(s.migrate.command).toEqual([
    "migrate", "--role", "cdr_worker", "--user", "cdr_worker", "--password-file", "/run/secrets/clickhouse-worker-password",
    "--dlq-role", "cdr_dlq", "--dlq-user", "cdr_dlq", "--dlq-password-file", "/run/secrets/clickhouse-dlq-password",
  ]);
  expect(s.migrate.secrets).toEqual(["clickhouse-worker-password", "clickhouse-dlq-password"]);
  expect(s.worker.environment.CLICKHOUSE_USER).toBe("cdr_worker");
  expect(s.worker.environment.CLICKHOUSE_PASSWORD_FILE).toBe("/run/secrets/clickhouse-worker-password");
  expect(s.worker.environment.CLICKHOUSE_PASSWORD).toBeUndefined();
  expect(s.worker.secrets).toEqual(["clickhouse-worker-password", "dlq-provenance-key"]);
  // …and it signs what it dead-letters with a key of the same kind (docs/security.md).
  expect(s.worker.environment.DLQ_PROVENANCE_KEY_FILE).toBe("/run/secrets/dlq-provenance-key");
  expect(s.worker.environment.DLQ_PROVENANCE_KEY).toBeUndefined();
  expect(s.migrate.depends_on.topics.condition).toBe("service_completed_successfully");
  expect(s.worker.depends_on.migrate.condition).toBe("service_completed_successfully");
  expect(s.worker.healthcheck.test).toEqual(["CMD", "/usr/local/bin/cdr-worker", "probe", "http://127.0.0.1:8081/readyz"]);
  expect(s.generator.profiles).toEqual(["demo"]);
  // The observability profile: Prometheus with the shipped rules, Grafana with the dashboard and the datasource.
  expect([s.prometheus.profiles, s.grafana.profiles]).toEqual([["observability"], ["observability"]]);
  expect(s.prometheus.volumes).toContain("./deploy/prometheus/cdr-worker.rules.yml:/etc/prometheus/cdr-worker.rules.yml:ro");
  expect(s.grafana.volumes).toContain("./deploy/grafana/cdr-worker.json:/var/lib/grafana/dashboards/cdr-worker.json:ro");
  for (const svc of [s.prometheus, s.grafana]) for (const v of svc.volumes as string[]) expect(Bun.file(`${ROOT}/${v.split(":")[0]}`.replace("/./", "/")).size).toBeGreaterThan(0);
  // Every dependency names a service that exists; the worker reaches services by name.
  for (const svc of Object.values(s)) for (const dep of Object.keys(svc.depends_on ?? {})) expect(s[dep]).toBeDefined();
  expect(s.worker.environment.KAFKA_BROKERS).toBe("kafka:9092");
  expect(s.worker.environment.CLICKHOUSE_URL).toBe("http://clickhouse:8123");
});

test("compose.yml: no default password (every use of CLICKHOUSE_PASSWORD requires it) and the stats port on loopback only", async () => {
  const text = await Bun.file(`${ROOT}/compose.yml`).text();
  const uses = [...text.matchAll(/\$\{CLICKHOUSE_PASSWORD([^}]*)\}/g)].map((m) => m[1]!);
  expect(uses.length).toBeGreaterThanOrEqual(2);
  for (const u of uses) expect(u).toStartWith(":?");
  // The worker's own password: a file compose refuses to start without.
  expect(text).toContain("file: ${CLICKHOUSE_WORKER_PASSWORD_FILE:?");
  expect(text).toContain("file: ${CLICKHOUSE_DLQ_PASSWORD_FILE:?");
  // …and the key that signs the DLQ's envelopes.
  expect(text).toContain("file: ${DLQ_PROVENANCE_KEY_FILE:?");
  const s = (Bun.YAML.parse(text) as { services: Record<string, any> }).services;
  // A free host port each, so `--scale worker=N` runs N workers; none fixes WORKER_INSTANCE.
  for (const [name, svc] of Object.entries(s)) for (const p of svc.ports ?? []) if (String(p).endsWith(":8081")) expect([name, String(p)]).toEqual([name, "127.0.0.1::8081"]);
  expect(s.worker.environment.WORKER_INSTANCE).toBeUndefined();
});

test("compose.yml: the cluster profile's workers have the worker's hardening and sign with the DLQ key", async () => {
  const s = (Bun.YAML.parse(await Bun.file(`${ROOT}/compose.yml`).text()) as { services: Record<string, any> }).services;
  const hardening = ["read_only", "tmpfs", "cap_drop", "security_opt", "ulimits"];
  for (const k of hardening) expect({ [k]: s["cluster-worker"][k] }).toEqual({ [k]: s.worker[k] });
  expect(s.worker.read_only).toBe(true);
  expect(s["cluster-worker"].secrets).toContain("dlq-provenance-key");
  expect(s["cluster-worker"].environment.DLQ_PROVENANCE_KEY_FILE).toBe("/run/secrets/dlq-provenance-key");
  expect(s["cluster-worker"].environment.WORKER_INSTANCE).toBeUndefined();
});

test("Dockerfile: multi-stage onto distroless/cc as non-root, copying exactly the listed libraries", async () => {
  const df = await Bun.file(`${ROOT}/Dockerfile`).text();
  expect(df.match(/^FROM /gm)?.length).toBe(2);
  // The bases are arguments that default to the real images (scripts/image/base-images.sh makes stand-ins).
  expect(df).toContain("ARG BUILD_BASE=debian:bookworm-slim");
  expect(df).toContain("ARG RUNTIME_BASE=gcr.io/distroless/cc-debian12:nonroot");
  expect(df).toContain("FROM ${RUNTIME_BASE}");
  expect(df).toContain("USER nonroot");
  expect(df).toContain("scripts/image/copy-libs.txt");
  expect(df).toContain('ENTRYPOINT ["/usr/local/bin/cdr-worker"]');
});

test("Dockerfile: the image embeds librdkafka built by the same script and pin as provisioning", async () => {
  const df = await Bun.file(`${ROOT}/Dockerfile`).text();
  expect(df).toContain("COPY scripts/librdkafka scripts/librdkafka");
  expect(df).toContain("RUN bash scripts/librdkafka/build.sh /opt/librdkafka");
  expect(df).toContain("LIBRDKAFKA_PATH=/opt/librdkafka/lib/librdkafka.so.1 bun scripts/build.ts");
  expect(df.indexOf("build.sh /opt/librdkafka")).toBeLessThan(df.indexOf("bun scripts/build.ts"));
});

test("Dockerfile: the dependency patches are in the build context before bun install needs them", async () => {
  const df = await Bun.file(`${ROOT}/Dockerfile`).text();
  const pkg = (await Bun.file(`${ROOT}/package.json`).json()) as { patchedDependencies?: Record<string, string> };
  const patches = Object.values(pkg.patchedDependencies ?? {});
  expect(patches.length).toBeGreaterThan(0);
  const install = df.indexOf("RUN bun install");
  expect(install).toBeGreaterThan(0);
  const copied = [...df.slice(0, install).matchAll(/^COPY (\S+)/gm)].map((m) => m[1]!);
  for (const patch of patches) expect(copied.some((c) => patch === c || patch.startsWith(`${c}/`))).toBe(true);
});

test("compose.yml `cluster` profile: 3 KRaft brokers in one quorum, RF 3 topics, 2 ClickHouse replicas with ZooKeeper, 3 workers", async () => {
  const s = (Bun.YAML.parse(await Bun.file(`${ROOT}/compose.yml`).text()) as { services: Record<string, any> }).services;
  const cluster = Object.keys(s).filter((k) => s[k].profiles?.includes("cluster")).sort();
  expect(cluster).toEqual(["clickhouse-1", "clickhouse-2", "cluster-migrate", "cluster-topics", "cluster-worker", "kafka-1", "kafka-2", "kafka-3", "zookeeper"]);
  const brokers = ["kafka-1", "kafka-2", "kafka-3"].map((b) => s[b].environment);
  expect(brokers.map((e) => e.KAFKA_NODE_ID)).toEqual(["1", "2", "3"]);
  expect(brokers.map((e) => e.KAFKA_ADVERTISED_LISTENERS)).toEqual(["kafka-1", "kafka-2", "kafka-3"].map((b) => `PLAINTEXT://${b}:9092`));
  expect(new Set(brokers.map((e) => e.KAFKA_CONTROLLER_QUORUM_VOTERS))).toEqual(new Set(["1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"]));
  // One formatted cluster: the same id everywhere, 16 bytes in base64 as kafka-storage wants it.
  expect(new Set(brokers.map((e) => e.CLUSTER_ID)).size).toBe(1);
  expect(Buffer.from(brokers[0].CLUSTER_ID, "base64url").length).toBe(16);
  expect(brokers.every((e) => e.KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR === "3")).toBe(true);
  expect(s["cluster-topics"].command).toEqual(["topics", "ensure", "--replication-factor", "3", "--partitions", "12", "--keep-configs"]);
  expect(s["cluster-migrate"].command).toEqual(["migrate", "--cluster", "cdr_cluster"]);
  const env = s["cluster-worker"].environment;
  expect(env.KAFKA_BROKERS).toBe("kafka-1:9092,kafka-2:9092,kafka-3:9092");
  expect(env.CLICKHOUSE_URL).toBe("http://clickhouse-1:8123,http://clickhouse-2:8123");
  expect(s["cluster-worker"].deploy.replicas).toBe(3);
  // The ClickHouse nodes: the mounted config names the cluster the migration uses, its two replicas, ZooKeeper.
  expect([s["clickhouse-1"].environment.REPLICA_NAME, s["clickhouse-2"].environment.REPLICA_NAME]).toEqual(["clickhouse-1", "clickhouse-2"]);
  for (const n of ["clickhouse-1", "clickhouse-2"]) expect(s[n].volumes).toContain("./deploy/clickhouse/cluster.xml:/etc/clickhouse-server/config.d/cluster.xml:ro");
  const xml = await Bun.file(`${ROOT}/deploy/clickhouse/cluster.xml`).text();
  expect(xml).toContain("<cdr_cluster>");
  expect([...xml.matchAll(/<replica><host>(clickhouse-\d)<\/host>/g)].map((m) => m[1])).toEqual(["clickhouse-1", "clickhouse-2"]);
  expect(xml).toContain("<host>zookeeper</host><port>2181</port>");
  // Every service the profile depends on is in the profile: `up cluster-worker` starts nothing else.
  for (const k of cluster) for (const dep of Object.keys(s[k].depends_on ?? {})) expect(cluster).toContain(dep);
});

test("compose.yml: least privilege: the worker read-only with a tmpfs /tmp, no capabilities, no new privileges, no core files; Prometheus and Grafana on loopback, Grafana without anonymous access or a default password", async () => {
  const text = await Bun.file(`${ROOT}/compose.yml`).text();
  const s = (Bun.YAML.parse(text) as { services: Record<string, any> }).services;
  expect(s.worker.read_only).toBe(true);
  expect(s.worker.tmpfs).toEqual(["/tmp"]);
  expect(s.worker.cap_drop).toEqual(["ALL"]);
  expect(s.worker.security_opt).toEqual(["no-new-privileges:true"]);
  expect(s.worker.ulimits.core).toEqual({ soft: 0, hard: 0 });
  expect(s.prometheus.ports).toEqual(["127.0.0.1:9090:9090"]);
  expect(s.grafana.ports).toEqual(["127.0.0.1:3000:3000"]);
  expect(s.grafana.environment.GF_AUTH_ANONYMOUS_ENABLED).toBe("false");
  expect(s.grafana.environment.GF_SECURITY_ADMIN_PASSWORD).toStartWith("${GRAFANA_ADMIN_PASSWORD:?");
});

test("compose.yml: the workers run the production profile, and compose waits out their stop deadline", async () => {
  const s = (Bun.YAML.parse(await Bun.file(`${ROOT}/compose.yml`).text()) as { services: Record<string, any> }).services;
  for (const name of ["worker", "cluster-worker"]) {
    const svc = s[name];
    expect({ name, env_file: svc.env_file }).toEqual({ name, env_file: "deploy/kubernetes/config/production.env" });
    // What compose gives the worker: the profile, then its own environment over it.
    const env = { ...productionProfile(), ...svc.environment };
    for (const k of Object.keys(productionProfile())) expect({ [k]: svc.environment[k] }).toEqual({ [k]: undefined });
    // The secrets' files are the container's: not needed for the deadline.
    const deadline = loadConfig(Object.fromEntries(Object.entries(env).filter(([k]) => !k.endsWith("_FILE"))) as Record<string, string>).shutdownTimeoutMs / 1000;
    expect({ name, grace: svc.stop_grace_period }).toEqual({ name, grace: `${deadline + 10}s` });
  }
});

test("the dashboard asks for its Prometheus (a variable, no fixed datasource) and shows the age of the oldest waiting record", async () => {
  const d = JSON.parse(await Bun.file(`${ROOT}/deploy/grafana/cdr-worker.json`).text()) as {
    templating: { list: Array<{ name: string; type: string; query: string }> };
    panels: Array<{ title: string; datasource?: { uid: string }; targets: Array<{ expr: string; datasource?: { uid: string } }> }>;
  };
  expect(d.templating.list).toContainEqual(expect.objectContaining({ name: "datasource", type: "datasource", query: "prometheus" }));
  const uids = d.panels.flatMap((p) => [p.datasource?.uid, ...p.targets.map((t) => t.datasource?.uid)]).filter(Boolean);
  expect(uids.length).toBeGreaterThan(10);
  expect([...new Set(uids)]).toEqual(["${datasource}"]);
  expect(d.panels.some((p) => p.targets.some((t) => t.expr.includes("cdr_worker_partition_lag_seconds")))).toBe(true);
});
