// deploy/alertmanager/alertmanager.yml against Debian's real Alertmanager: the rules' own alerts
// (names and severities read from deploy/prometheus/cdr-worker.rules.yml) fired as one cause fires
// them, and read back. Each cause pages once, its symptoms are inhibited, and another worker's
// alerts are not.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Subprocess } from "bun";
import { freePort, ROOT, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const CONFIG = `${ROOT}/deploy/alertmanager/alertmanager.yml`;
type Rule = { alert?: string; labels?: { severity?: string }; annotations?: Record<string, string> };
const rules = (Bun.YAML.parse(readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8")) as { groups: { rules: Rule[] }[] }).groups
  .flatMap((g) => g.rules)
  .filter((r) => r.alert);
const severity = (alert: string) => rules.find((r) => r.alert === alert)!.labels!.severity!;

let am: Subprocess;
let api = "";
const dir = mkdtempSync(`${tmpdir()}/cdr-alertmanager-`);

beforeAll(async () => {
  const check = Bun.spawnSync(["amtool", "check-config", CONFIG], { stdout: "pipe", stderr: "pipe" });
  expect(check.exitCode).toBe(0);
  const port = await freePort();
  api = `http://127.0.0.1:${port}/api/v2`;
  am = Bun.spawn(
    ["prometheus-alertmanager", `--config.file=${CONFIG}`, `--storage.path=${dir}`, `--web.listen-address=127.0.0.1:${port}`, "--cluster.listen-address="],
    { stdout: "ignore", stderr: "ignore" },
  );
  await waitFor(async () => ((await fetch(`${api}/status`).catch(() => null))?.ok ? true : undefined), 30_000, "Alertmanager answering");
});

afterAll(() => {
  am?.kill();
  rmSync(dir, { recursive: true, force: true });
});

const WORKERS = ["w1", "w2", "w3"];
type Fired = { alertname: string; job: string; instance?: string };
/** One cause's alerts on each of three workers, and its job-level alert (no instance). */
const onEvery = (job: string, perWorker: string[], jobLevel: string[]): Fired[] => [
  ...jobLevel.map((alertname) => ({ alertname, job })),
  ...WORKERS.flatMap((instance) => perWorker.map((alertname) => ({ alertname, job, instance }))),
];
/** What each cause fires, as Prometheus would send it with the rules' severities; a job a cause. */
const FIRED: Fired[] = [
  // ClickHouse down under CH_UNREACHABLE_POLICY=wait: every worker paused.
  ...onEvery("ch-wait", ["CdrWorkerNotReady", "CdrWorkerNoCommitProgress", "CdrWorkerLagGrowing", "CdrWorkerReplayCheckStuck"], ["CdrWorkerClickHouseInsertsFailing"]),
  // ClickHouse refusing the workers (an operator's change) under CH_UNREACHABLE_POLICY=wait.
  ...onEvery("ch-refused", ["CdrWorkerNotReady", "CdrWorkerNoCommitProgress", "CdrWorkerLagGrowing", "CdrWorkerReplayCheckStuck"], ["CdrWorkerClickHouseRefusesWorker", "CdrWorkerClickHouseInsertsFailing"]),
  // ClickHouse down under CH_UNREACHABLE_POLICY=dlq: batches reach the DLQ, and inserts keep failing.
  ...onEvery("ch-dlq", ["CdrWorkerNotReady", "CdrWorkerLagGrowing"], ["CdrWorkerClickHouseRetriesExhausted", "CdrWorkerClickHouseInsertsFailing"]),
  // Nothing consumes: every worker down, so no partition is owned.
  ...onEvery("none", ["CdrWorkerDown", "CdrWorkerNotReady"], ["CdrWorkerNoneConsuming", "CdrWorkerPartitionsUnowned"]),
  // Causes of one worker's own, beside others of the same job.
  ...[
    ["w-breaker", ["CdrWorkerDlqBreakerTripped", "CdrWorkerNotReady", "CdrWorkerNoCommitProgress", "CdrWorkerLagGrowing", "CdrWorkerDlqRatioHigh"]],
    // The worker itself gone: what it said last keeps other alerts up until they resolve.
    ["w-down", ["CdrWorkerDown", "CdrWorkerNotReady", "CdrWorkerMemoryNearBound"]],
    // A backlog near its deletion: the retention alert pages, the growing lag is the same backlog.
    ["w-backlog", ["CdrWorkerLagNearRetention", "CdrWorkerLagGrowing"]],
    // Another worker, not ready for a reason of its own: nothing of the others silences it.
    ["w-other", ["CdrWorkerNotReady"]],
  ].flatMap(([instance, alerts]) => (alerts as string[]).map((alertname) => ({ alertname, job: "cdr-worker", instance: instance as string }))),
];

test("each cause pages once, across three workers: its symptoms are inhibited, another cause's are not", async () => {
  for (const { alertname } of FIRED) expect(rules.map((r) => r.alert)).toContain(alertname);
  const now = Date.now();
  const body = FIRED.map(({ alertname, job, instance }) => ({
    labels: { alertname, job, ...(instance ? { instance } : {}), severity: severity(alertname) },
    annotations: { runbook_url: `docs/runbooks.md#${alertname.toLowerCase()}` },
    startsAt: new Date(now - 60_000).toISOString(),
    endsAt: new Date(now + 600_000).toISOString(),
  }));
  const posted = await fetch(`${api}/alerts`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(posted.status).toBe(200);

  type Alert = { labels: Record<string, string>; status: { state: string; inhibitedBy: string[] } };
  const expected = {
    "ch-wait": ["CdrWorkerClickHouseInsertsFailing"],
    "ch-dlq": ["CdrWorkerClickHouseRetriesExhausted"],
    "ch-refused": ["CdrWorkerClickHouseRefusesWorker"],
    none: ["CdrWorkerNoneConsuming"],
    "cdr-worker/w-breaker": ["CdrWorkerDlqBreakerTripped"],
    "cdr-worker/w-down": ["CdrWorkerDown"],
    "cdr-worker/w-backlog": ["CdrWorkerLagNearRetention"],
    "cdr-worker/w-other": ["CdrWorkerNotReady"],
  };
  const activeBy = (alerts: Alert[]) => {
    const out: Record<string, string[]> = {};
    for (const a of alerts) {
      const key = a.labels.instance ? `${a.labels.job}/${a.labels.instance}` : a.labels.job!;
      if (a.status.state === "active") (out[key] ??= []).push(a.labels.alertname!);
    }
    return out;
  };
  // The inhibitor reads the alerts as they arrive: wait for it to have seen them all.
  let alerts: Alert[] = [];
  const settled = await waitFor(async () => {
    alerts = (await (await fetch(`${api}/alerts`)).json()) as Alert[];
    return alerts.length === body.length && Bun.deepEquals(activeBy(alerts), expected) ? true : undefined;
  }, 20_000, "the inhibitor to settle").catch(() => false);
  expect({ settled, alerts: alerts.length, active: activeBy(alerts) }).toEqual({ settled: true, alerts: body.length, active: expected });
  // Each worker's one active alert pages (a cause that silences pages must page itself), and each
  // silenced alert names the alert that silences it.
  for (const [cause, [alertname]] of Object.entries(expected)) expect({ cause, severity: severity(alertname!) }).toEqual({ cause, severity: "page" });
  const suppressed = alerts.filter((a) => a.status.state === "suppressed");
  expect(suppressed.length).toBe(body.length - Object.keys(expected).length);
  for (const a of suppressed) expect(a.status.inhibitedBy.length).toBe(1);
});
