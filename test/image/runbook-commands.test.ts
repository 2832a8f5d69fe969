// Every `cdr-worker …` command docs/runbooks.md gives runs in the image, as an operator would run it
// there (the image has no shell or curl): against a worker that has stored and dead-lettered
// records, each with its placeholders filled, each ending 0.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { e2eScope } from "../support/e2e.ts";
import { ROOT, run } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const TAG = "localhost/cdr-worker:runbook";
const PODMAN_ENV = { ...process.env, CONTAINERS_CONF: `${ROOT}/scripts/image/containers.conf` } as Record<string, string>;
const KEY = "runbook-provenance-key-0123456789abcdef0123";
const { names } = e2eScope();
let worker: RunningWorker | undefined;

beforeAll(async () => {
  await run(["bash", `${ROOT}/scripts/image/build.sh`, TAG]);
}, 1_800_000);
afterAll(async () => {
  if (worker) await worker.stop();
});

/** The commands the page gives, as written. */
const commands = [...new Set([...readFileSync(`${ROOT}/docs/runbooks.md`, "utf8").matchAll(/`cdr-worker ([^`]+)`/g)].map((m) => m[1]!))];

test("every cdr-worker command of the runbooks runs in the image and ends 0, its placeholders filled", async () => {
  expect(commands.length).toBeGreaterThanOrEqual(8);
  const n = await names("runbook");
  const env = workerEnv(n, { DLQ_PROVENANCE_KEY: KEY });
  const { valid, invalid } = await produceSynthetic(n.raw, 400, 0.1, 77);
  worker = await startWorker(env);
  await statsWhen(worker, (s) => s.total_clickhouse === valid && s.total_dlq === invalid && s.ready.ready, 60_000, "records stored and dead-lettered");
  const stats = new URL(worker.statsUrl);
  const anHourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const filled = (c: string) =>
    c
      .replace(/<(an hour ago|when it began|that time)>/g, anHourAgo)
      .replace("<reason>", "malformed_json")
      // A partition and an offset of it: the first record, stored or dead-lettered.
      .replace("<p>", "0")
      .replace("<from>", "0")
      .replace("http://<worker>:8081", `http://${stats.host}`)
      // Run in the worker's pod: its stats port on loopback (the breaker's reset is taken from there alone).
      .replace("http://127.0.0.1:8081", `http://${stats.host}`);
  const envArgs = Object.entries(env).filter(([k]) => k !== "PATH").flatMap(([k, v]) => ["--env", `${k}=${v}`]);
  const ended: Record<string, number | null> = {};
  for (const c of commands) {
    const args = filled(c).split(" ");
    expect({ c, placeholders: args.filter((a) => a.includes("<")) }).toEqual({ c, placeholders: [] });
    const p = Bun.spawn(["podman", "run", "--rm", "--network", "host", "--read-only", ...envArgs, TAG, ...args], { env: PODMAN_ENV, stdout: "pipe", stderr: "pipe" });
    const [, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    ended[c] = code;
    if (code !== 0) console.error(`cdr-worker ${c}: ${err.slice(-800)}`);
  }
  expect(ended).toEqual(Object.fromEntries(commands.map((c) => [c, 0])));
}, 600_000);
