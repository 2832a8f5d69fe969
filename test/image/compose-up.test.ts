// compose.yml's default profile brought up for real, under podman-compose, with the stand-in images
// of compose.podman.yml: Kafka and ClickHouse come up healthy, the one-shot `topics` and `migrate`
// finish, the worker ingests what the generator sends, its stats port is bound on loopback only;
// the observability profile's Prometheus scrapes it with the shipped rules; and `down` leaves
// nothing of the project behind.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { composeNetworkHasDns } from "../support/podman.ts";
import { ROOT, run, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const PROJECT = "cdrtest";
// The worker's password as a secret file, in a directory only this user enters; the file readable
// by the image's user (nonroot), as docs/security.md says to make it.
const secrets = mkdtempSync(`${tmpdir()}/cdr-compose-secrets-`);
const WORKER_PASSWORD_FILE = `${secrets}/clickhouse-worker-password`;
writeFileSync(WORKER_PASSWORD_FILE, "compose-test-worker-secret\n");
chmodSync(WORKER_PASSWORD_FILE, 0o644);
const DLQ_PASSWORD_FILE = `${secrets}/clickhouse-dlq-password`;
writeFileSync(DLQ_PASSWORD_FILE, "compose-test-dlq-secret\n");
chmodSync(DLQ_PASSWORD_FILE, 0o644);
const DLQ_KEY_FILE = `${secrets}/dlq-provenance-key`;
writeFileSync(DLQ_KEY_FILE, "compose-test-dlq-provenance-key-0123456789\n");
chmodSync(DLQ_KEY_FILE, 0o644);
// Passed to each child: Bun.spawn's children get the environment the process started with.
const env = { ...process.env, CONTAINERS_CONF: `${ROOT}/scripts/image/containers.conf`, CLICKHOUSE_PASSWORD: "compose-test-secret", CLICKHOUSE_WORKER_PASSWORD_FILE: WORKER_PASSWORD_FILE, CLICKHOUSE_DLQ_PASSWORD_FILE: DLQ_PASSWORD_FILE, DLQ_PROVENANCE_KEY_FILE: DLQ_KEY_FILE, GRAFANA_ADMIN_PASSWORD: "compose-test-grafana", CDRWORKER_DOCS_URL: "https://git.example/cdr-worker/blob/v0.3.0/docs" } as Record<string, string>;
const compose = async (...args: string[]) => {
  const p = Bun.spawn([`${ROOT}/.local/podman-compose/bin/podman-compose`, "-p", PROJECT, "-f", `${ROOT}/compose.yml`, "-f", `${ROOT}/compose.podman.yml`, ...args], { env, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`podman-compose ${args.join(" ")} exited ${code}: ${err.slice(-2000)}`);
  return out;
};
const containers = async () => (await run(["podman", "ps", "--all", "--filter", `label=io.podman.compose.project=${PROJECT}`, "--format", "{{.Names}}"])).split("\n").filter(Boolean);
/** Where a worker's stats port is published: a free loopback port each (`podman port`). */
async function statsOf(container: string): Promise<string | undefined> {
  const out = await run(["podman", "port", container, "8081"]).catch(() => "");
  const addr = out.trim().split("\n")[0];
  return addr ? `http://${addr}` : undefined;
}
let STATS = "";
const timings: Record<string, number> = {};

/** What the services did, for a wait that timed out: each container's state and its last log lines. */
async function diagnosis(): Promise<string> {
  const lines: string[] = [];
  for (const name of await containers()) {
    const state = (await run(["podman", "inspect", "--format", "{{.State.Status}} exit {{.State.ExitCode}}", name]).catch(() => "?")).trim();
    const logs = (await run(["podman", "logs", "--tail", "5", name]).catch((e: Error) => e.message)).trim();
    lines.push(`${name}: ${state}\n  ${logs.split("\n").join("\n  ")}`);
  }
  return lines.join("\n");
}

/** waitFor, but a timeout says what each service was doing. */
async function waitForServices<T>(fn: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  try {
    return await waitFor(fn, ms, what);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${await diagnosis()}`);
  }
}

beforeAll(async () => {
  if (!(await composeNetworkHasDns(`${PROJECT}-dns-probe`)))
    throw new Error(
      "podman's networks have no DNS, so compose's containers cannot resolve each other (clickhouse, kafka): " +
        "install Debian's golang-github-containernetworking-plugin-dnsname (scripts/provision.sh does)",
    );
  await compose("down", "--volumes").catch(() => {});
  const t0 = performance.now();
  await run(["bash", `${ROOT}/scripts/image/standins.sh`]);
  await run(["bash", `${ROOT}/scripts/image/build.sh`, "localhost/cdr-worker:latest"]);
  timings.images_s = (performance.now() - t0) / 1000;
}, 1_800_000);

afterAll(async () => {
  await compose("down", "--volumes").catch(() => {});
  rmSync(secrets, { recursive: true, force: true });
});

test("up: healthy services, one-shots finished, the worker ingests on a loopback-only stats port; down: nothing left", async () => {
  try {
    await upIngestDown();
  } finally {
    // Whatever failed, nothing of the project stays behind for the next test or run (a scaled
    // worker's replicas included, which podman-compose's `down` does not name).
    const left = await containers().catch(() => [] as string[]);
    if (left.length) await run(["podman", "rm", "--force", "--time", "0", ...left]).catch(() => {});
    await compose("--profile", "observability", "--profile", "demo", "down", "--volumes").catch(() => {});
  }
}, 600_000);

async function upIngestDown(): Promise<void> {
  const t0 = performance.now();
  await compose("up", "-d");
  const stats = await waitForServices(async () => {
    STATS = (await statsOf(`${PROJECT}_worker_1`)) ?? "";
    if (!STATS) return undefined;
    const r = await fetch(`${STATS}/internal/stats`).catch(() => null);
    return r?.ok ? ((await r.json()) as Record<string, any>) : undefined;
  }, 240_000, "the worker's stats on its loopback port");
  await waitForServices(async () => ((await fetch(`${STATS}/readyz`)).status === 200 ? true : undefined), 120_000, "worker ready");
  timings.up_to_ready_s = (performance.now() - t0) / 1000;
  expect(stats.state).toBeDefined();
  const exit = async (svc: string) => (await run(["podman", "inspect", "--format", "{{.State.ExitCode}} {{.State.Status}}", `${PROJECT}_${svc}_1`])).trim();
  expect(await exit("topics")).toBe("0 exited");
  expect(await exit("migrate")).toBe("0 exited");
  // podman 4.3 runs health checks from systemd timers, which this host lacks: each service's own
  // check (compose.yml's command) is run by hand, and must pass.
  for (const svc of ["kafka", "clickhouse", "worker"]) {
    await run(["podman", "healthcheck", "run", `${PROJECT}_${svc}_1`]);
    expect((await run(["podman", "inspect", "--format", "{{.State.Health.Status}}", `${PROJECT}_${svc}_1`])).trim()).toBe("healthy");
  }
  // Bound on loopback only: the stats port has no authentication (docs/security.md).
  expect((await run(["podman", "port", `${PROJECT}_worker_1`])).trim()).toMatch(/^8081\/tcp -> 127\.0\.0\.1:\d+$/);
  // Least privilege, as the running container has it, not as the file says.
  const worker = JSON.parse(await run(["podman", "inspect", `${PROJECT}_worker_1`]))[0];
  expect(worker.HostConfig.ReadonlyRootfs).toBe(true);
  expect(Object.keys(worker.HostConfig.Tmpfs ?? {})).toContain("/tmp");
  expect(worker.EffectiveCaps ?? []).toEqual([]);
  expect(JSON.stringify(worker.HostConfig.SecurityOpt)).toContain("no-new-privileges");
  expect(worker.HostConfig.Ulimits.find((u: { Name: string }) => u.Name === "RLIMIT_CORE")).toMatchObject({ Soft: 0, Hard: 0 });
  // Its own ClickHouse user, its password a mounted file: no password in its environment.
  const workerEnvNames = (worker.Config.Env as string[]).map((e) => e.split("=")[0]);
  expect(workerEnvNames).not.toContain("CLICKHOUSE_PASSWORD");
  expect(worker.Config.Env).toContain("CLICKHOUSE_USER=cdr_worker");
  expect(worker.Config.Env).toContain("CLICKHOUSE_PASSWORD_FILE=/run/secrets/clickhouse-worker-password");
  expect(JSON.stringify(worker)).not.toContain("compose-test-worker-secret");
  expect(worker.Mounts.map((m: { Destination: string }) => m.Destination)).toContain("/run/secrets/clickhouse-worker-password");
  // The DLQ provenance key, a mounted file as well: the worker signs its envelopes with it.
  expect(worker.Config.Env).toContain("DLQ_PROVENANCE_KEY_FILE=/run/secrets/dlq-provenance-key");
  expect(JSON.stringify(worker)).not.toContain("compose-test-dlq-provenance-key-0123456789");
  expect(worker.Mounts.map((m: { Destination: string }) => m.Destination)).toContain("/run/secrets/dlq-provenance-key");
  const workerLog = await run(["sh", "-c", `podman logs ${PROJECT}_worker_1 2>&1`]);
  expect(workerLog).toContain("cdr-worker running");
  expect(workerLog).not.toContain("DLQ_PROVENANCE=unsigned");

  const t1 = performance.now();
  await compose("--profile", "demo", "run", "--rm", "generator", "generate", "--count", "2000", "--invalid-share", "0.05");
  const done = await waitForServices(async () => {
    const s = (await (await fetch(`${STATS}/internal/stats`)).json()) as Record<string, any>;
    return s.total_processed === 2000 ? s : undefined;
  }, 120_000, "2000 records processed");
  timings.ingest_s = (performance.now() - t1) / 1000;
  expect(done.total_clickhouse + done.total_dlq).toBe(2000);
  expect(done.total_dlq).toBeGreaterThan(0);
  // The DLQ table's filler: every envelope a row, and its own health check passes.
  const dlqQuery = `http://127.0.0.1:8123/?user=default&password=${env.CLICKHOUSE_PASSWORD}&query=${encodeURIComponent("SELECT count() FROM telecom.cdr_dlq")}`;
  const dlqRows = () => run(["podman", "exec", `${PROJECT}_clickhouse_1`, "wget", "-qO-", dlqQuery]);
  await waitForServices(async () => (Number((await dlqRows()).trim()) === done.total_dlq ? true : undefined), 60_000, "the DLQ table filled");
  await run(["podman", "healthcheck", "run", `${PROJECT}_dlq-fill_1`]);
  // As the DLQ table's own user, its own password mounted; the worker's password is not in its container,
  // and the worker's holds none of the filler's.
  const filler = JSON.parse(await run(["podman", "inspect", `${PROJECT}_dlq-fill_1`]))[0];
  expect(filler.Config.Env).toContain("CLICKHOUSE_USER=cdr_dlq");
  expect(filler.Config.Env).toContain("CLICKHOUSE_PASSWORD_FILE=/run/secrets/clickhouse-dlq-password");
  const fillerMounts = filler.Mounts.map((m: { Destination: string }) => m.Destination);
  expect(fillerMounts).toContain("/run/secrets/clickhouse-dlq-password");
  expect(fillerMounts).not.toContain("/run/secrets/clickhouse-worker-password");
  expect(worker.Mounts.map((m: { Destination: string }) => m.Destination)).not.toContain("/run/secrets/clickhouse-dlq-password");

  // The observability profile's Prometheus (Grafana cannot be had here): it loads the shipped rules
  // and scrapes the worker and the filler by their service names.
  const t3 = performance.now();
  await compose("--profile", "observability", "up", "-d", "prometheus");
  // It scrapes the DLQ table's filler too, as the job cdr-worker-dlq-fill.
  const jobs = await waitForServices(async () => {
    const r = await fetch("http://127.0.0.1:9090/api/v1/targets").catch(() => null);
    const active: any[] = r?.ok ? ((await r.json()) as any).data.activeTargets : [];
    const up = active.filter((t) => t.health === "up").map((t) => t.labels.job).sort();
    return up.length === 2 ? up : undefined;
  }, 90_000, "Prometheus scraping the worker and the filler");
  expect(jobs).toEqual(["cdr-worker", "cdr-worker-dlq-fill"]);
  const rules = (await (await fetch("http://127.0.0.1:9090/api/v1/rules")).json()) as any;
  expect(rules.data.groups.flatMap((g: any) => g.rules).length).toBeGreaterThan(5);
  timings.prometheus_scraping_s = (performance.now() - t3) / 1000;

  // Scale-out: three workers of one group share the raw topic's three partitions, each with a
  // stats port and a name of its own, and Prometheus finds every one by the service's name.
  const t4 = performance.now();
  await compose("up", "-d", "--scale", "worker=3");
  const workers = [1, 2, 3].map((i) => `${PROJECT}_worker_${i}`);
  const shares = await waitForServices(async () => {
    const got: Array<{ instance: string; partitions: number[] }> = [];
    for (const w of workers) {
      const url = await statsOf(w);
      const s = url ? await fetch(`${url}/internal/stats`).then((r) => r.json() as Promise<any>, () => null) : null;
      if (!s) return undefined;
      got.push({ instance: s.worker_instance, partitions: s.assigned_partitions });
    }
    // Stats are read one worker after another, so during a rebalance two may both name a partition
    // one of them is about to give up: only a read where the three shares cover the topic is settled.
    const owned = got.flatMap((g) => g.partitions).sort();
    return got.every((g) => g.partitions.length === 1) && owned.join() === "0,1,2" ? got : undefined;
  }, 180_000, "three workers owning a partition each");
  expect(shares.flatMap((g) => g.partitions).sort()).toEqual([0, 1, 2]);
  expect(new Set(shares.map((g) => g.instance)).size).toBe(3);
  const targets = await waitForServices(async () => {
    const r = await fetch("http://127.0.0.1:9090/api/v1/targets").catch(() => null);
    const active: any[] = r?.ok ? ((await r.json()) as any).data.activeTargets : [];
    const workers = active.filter((t) => t.labels.job === "cdr-worker");
    return workers.length === 3 && workers.every((t) => t.health === "up") ? workers : undefined;
  }, 90_000, "Prometheus scraping three workers");
  expect(new Set(targets.map((t: any) => t.labels.instance)).size).toBe(3);
  timings.scale_to_3_s = (performance.now() - t4) / 1000;
  // podman-compose's `down` removes the replicas the file names (one); Docker's removes them all.
  await run(["podman", "rm", "--force", "--time", "10", ...workers.slice(1)]);

  const t2 = performance.now();
  await compose("--profile", "observability", "down", "--volumes");
  timings.down_s = (performance.now() - t2) / 1000;
  expect(await containers()).toEqual([]);
  console.log(`compose under podman: ${Object.entries(timings).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(", ")}`);
}

test("without CLICKHOUSE_PASSWORD compose refuses to start, naming the variable: there is no default password", async () => {
  const { CLICKHOUSE_PASSWORD: _, ...rest } = env;
  const p = Bun.spawn([`${ROOT}/.local/podman-compose/bin/podman-compose`, "-p", PROJECT, "-f", `${ROOT}/compose.yml`, "-f", `${ROOT}/compose.podman.yml`, "config"], { env: rest, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  expect(code).not.toBe(0);
  expect(err).toContain("required variable CLICKHOUSE_PASSWORD is missing a value");
  expect(await containers()).toEqual([]);
});
