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

/** What a cause fires, per worker: the alerts Prometheus would send, with the rules' severities. */
const FIRED: Record<string, string[]> = {
  // A breaker trip: the worker stops consuming on purpose.
  "w-breaker": ["CdrWorkerDlqBreakerTripped", "CdrWorkerNotReady", "CdrWorkerNoCommitProgress", "CdrWorkerLagGrowing", "CdrWorkerDlqRatioHigh"],
  // ClickHouse down.
  "w-clickhouse": ["CdrWorkerClickHouseInsertsFailing", "CdrWorkerNotReady", "CdrWorkerNoCommitProgress", "CdrWorkerLagGrowing", "CdrWorkerReplayCheckStuck"],
  // The worker itself gone: what it said last keeps other alerts up until they resolve.
  "w-down": ["CdrWorkerDown", "CdrWorkerNotReady", "CdrWorkerMemoryNearBound"],
  // A backlog near its deletion: the retention alert pages, the growing lag is the same backlog.
  "w-backlog": ["CdrWorkerLagNearRetention", "CdrWorkerLagGrowing"],
  // Another worker, not ready for a reason of its own: nothing of the others silences it.
  "w-other": ["CdrWorkerNotReady"],
};

test("each cause pages once: its symptoms are inhibited on the same worker, never on another", async () => {
  for (const alerts of Object.values(FIRED)) for (const a of alerts) expect(rules.map((r) => r.alert)).toContain(a);
  const now = Date.now();
  const body = Object.entries(FIRED).flatMap(([instance, alerts]) =>
    alerts.map((alertname) => ({
      labels: { alertname, instance, job: "cdr-worker", severity: severity(alertname) },
      annotations: { runbook_url: `docs/runbooks.md#${alertname.toLowerCase()}` },
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(now + 600_000).toISOString(),
    })),
  );
  const posted = await fetch(`${api}/alerts`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(posted.status).toBe(200);

  type Alert = { labels: Record<string, string>; status: { state: string; inhibitedBy: string[] } };
  const expected = {
    "w-breaker": ["CdrWorkerDlqBreakerTripped"],
    "w-clickhouse": ["CdrWorkerClickHouseInsertsFailing"],
    "w-down": ["CdrWorkerDown"],
    "w-backlog": ["CdrWorkerLagNearRetention"],
    "w-other": ["CdrWorkerNotReady"],
  };
  const activeBy = (alerts: Alert[]) => {
    const out: Record<string, string[]> = {};
    for (const a of alerts) if (a.status.state === "active") (out[a.labels.instance!] ??= []).push(a.labels.alertname!);
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
  for (const [instance, [alertname]] of Object.entries(expected)) expect({ instance, severity: severity(alertname!) }).toEqual({ instance, severity: "page" });
  const suppressed = alerts.filter((a) => a.status.state === "suppressed");
  expect(suppressed.length).toBe(body.length - Object.keys(expected).length);
  for (const a of suppressed) expect(a.status.inhibitedBy.length).toBe(1);
});
