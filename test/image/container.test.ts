// The shipped Dockerfile, built and run for real: podman builds it on base images made from
// Debian's packages (scripts/image/build.sh), and the image runs under podman with the host's
// network against the local Kafka and ClickHouse, as an operator would: `topics ensure`,
// `migrate`, then `run` ingests; the health check's `probe` answers; SIGTERM stops it with exit
// 0; it runs as uid 65532 on a read-only root filesystem. Figures (build time, image size,
// start-up to ready, idle RSS) are printed for the README and the closing note.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { headOf, VERSION } from "../../src/version.ts";
import { deleteTopics } from "../support/kafka.ts";
import { CLICKHOUSE_URL, clickhouse, KAFKA_BROKERS, ROOT, run, uniqueName, waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";

setDefaultTimeout(60_000);

const TAG = "localhost/cdr-worker:test";
// runc and explicit ulimits for every container: what runs on this host (docs/install.md "Containers").
// Passed to each child: Bun.spawn's children get the environment the process started with.
const PODMAN_ENV = { ...process.env, CONTAINERS_CONF: `${ROOT}/scripts/image/containers.conf` } as Record<string, string>;
const RUN = ["run", "--network", "host", "--read-only"];
async function podman(...args: string[]): Promise<string> {
  const p = Bun.spawn(["podman", ...args], { env: PODMAN_ENV, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`podman ${args.join(" ")} exited ${code}: ${err}`);
  // The worker logs to stderr, which `podman logs` writes to its own.
  return args[0] === "logs" ? out + err : out;
}
let buildSeconds = 0;

beforeAll(async () => {
  const t0 = performance.now();
  await run(["bash", `${ROOT}/scripts/image/build.sh`, TAG]); // sets CONTAINERS_CONF itself
  buildSeconds = (performance.now() - t0) / 1000;
}, 1_800_000);

const names = { raw: uniqueName("image.raw"), dlq: uniqueName("image.dlq"), group: uniqueName("image-g"), table: uniqueName("image").replace(/\W/g, "_") };
const statsPort = 18_900 + Math.floor(Math.random() * 100);
const env = {
  KAFKA_BROKERS, CLICKHOUSE_URL, KAFKA_TOPIC_RAW: names.raw, KAFKA_TOPIC_DLQ: names.dlq, KAFKA_GROUP_ID: names.group,
  CLICKHOUSE_DATABASE: "e2e", CLICKHOUSE_TABLE: names.table, STATS_HOST: "127.0.0.1", STATS_PORT: String(statsPort),
  BATCH_FLUSH_INTERVAL_SECONDS: "0.5",
  DLQ_PROVENANCE_KEY: "container-test-provenance-key-0123456789abcdef",
};
const envArgs = Object.entries(env).flatMap(([k, v]) => ["--env", `${k}=${v}`]);
const container = uniqueName("cdr-worker-test").replace(/\W/g, "-");
const ch = clickhouse();

afterAll(async () => {
  await podman("rm", "--force", container).catch(() => {});
  for (const name of [`${names.table}_offsets_mv`, `${names.table}_offsets`, names.table])
    await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
  await ch.close();
  await deleteTopics(names.raw, names.dlq).catch(() => {});
});

test("the image runs as the non-root user on the distroless stand-in, its entrypoint the binary", async () => {
  const [config] = JSON.parse(await podman("image", "inspect", TAG)) as Array<{ Size: number; Config: { User: string; Entrypoint: string[]; Cmd: string[] } }>;
  expect(config!.Config.User).toBe("nonroot");
  expect(config!.Config.Entrypoint).toEqual(["/usr/local/bin/cdr-worker"]);
  expect(config!.Config.Cmd).toEqual(["run"]);
  // No shell in the image: distroless has none, and neither has its stand-in.
  await expect(podman(...RUN, "--rm", "--entrypoint", "/bin/sh", TAG, "-c", "true")).rejects.toThrow(/\/bin\/sh.*(no such file|not found)/i);
  // Tagged with its version too, and it names the commit it was built from.
  expect((await podman(...RUN, "--rm", `${TAG.slice(0, TAG.lastIndexOf(":"))}:${VERSION}`, "version")).trim()).toStartWith(`${VERSION} (commit ${headOf(ROOT)}) librdkafka `);
  console.log(`image: built in ${buildSeconds.toFixed(0)} s, ${(config!.Size / 2 ** 20).toFixed(1)} MiB`);
});

test("topics ensure, migrate, then run: records ingested, probe answers, SIGTERM exits 0, uid 65532, read-only root", async () => {
  await podman(...RUN, "--rm", ...envArgs, TAG, "topics", "ensure");
  await podman(...RUN, "--rm", ...envArgs, TAG, "migrate");
  const { valid, invalid } = await produceSynthetic(names.raw, 5000, 0.05, 77);
  const t0 = performance.now();
  await podman(...RUN, "--detach", "--name", container, ...envArgs, TAG, "run");
  const stats = async () => (await fetch(`http://127.0.0.1:${statsPort}/internal/stats`)).json() as Promise<Record<string, any>>;
  await waitFor(async () => ((await fetch(`http://127.0.0.1:${statsPort}/readyz`).catch(() => null))?.status === 200 ? true : undefined), 60_000, "ready");
  const readyMs = performance.now() - t0;
  const s = await waitFor(async () => {
    const s = await stats();
    return s.total_processed === valid + invalid && s.in_flight_buffer === 0 ? s : undefined;
  }, 60_000, "every record durable");
  expect([s.total_clickhouse, s.total_dlq]).toEqual([valid, invalid]);
  const rows = await (await ch.query({ query: `SELECT count() AS n, uniqExact(cdr_id) AS ids FROM e2e.${names.table}`, format: "JSONEachRow" })).json<{ n: string; ids: string }>();
  expect([Number(rows[0]!.n), Number(rows[0]!.ids)]).toEqual([valid, valid]);

  // The health check compose runs, inside the container.
  await podman("exec", container, "/usr/local/bin/cdr-worker", "probe", `http://127.0.0.1:${statsPort}/readyz`);
  const state = JSON.parse(await podman("inspect", container))[0] as { State: { Pid: number }; HostConfig: { ReadonlyRootfs: boolean } };
  expect(state.HostConfig.ReadonlyRootfs).toBe(true);
  const status = readFileSync(`/proc/${state.State.Pid}/status`, "utf8");
  expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe("65532");
  const idleRss = Number(/^VmRSS:\s+(\d+)/m.exec(status)![1]) / 1024;

  await podman("stop", "--time", "40", container);
  expect((await podman("inspect", "--format", "{{.State.ExitCode}}", container)).trim()).toBe("0");
  const logs = await podman("logs", container);
  expect(logs).toContain('"msg":"stopped cleanly"');
  console.log(`container: ready ${readyMs.toFixed(0)} ms after podman run, idle RSS ${idleRss.toFixed(0)} MiB, ${valid} rows and ${invalid} envelopes`);
}, 180_000);
