// The shipped rules are valid for Debian's Prometheus (2.42) and their unit tests pass: every alert
// fires on the synthetic series of an unhealthy worker and stays quiet for a healthy one.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const promtool = (...args: string[]) => Bun.spawnSync(["promtool", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });

test("promtool check rules: the rule file is valid", () => {
  const r = promtool("check", "rules", "deploy/prometheus/cdr-worker.rules.yml");
  expect(`${r.stdout}${r.stderr}`).toContain("SUCCESS");
  expect(r.exitCode).toBe(0);
});

test("promtool test rules: each alert has a firing and a non-firing case, the recording rules their values", async () => {
  const r = promtool("test", "rules", "test/prometheus/cdr-worker.rules.test.yml");
  expect(`${r.stdout}${r.stderr}`).toContain("SUCCESS");
  expect(r.exitCode).toBe(0);
  // Every alert of the rule file is exercised by a test.
  const rules = await Bun.file(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`).text();
  const tests = await Bun.file(`${ROOT}/test/prometheus/cdr-worker.rules.test.yml`).text();
  const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map((m) => m[1]!);
  expect(alerts.length).toBeGreaterThanOrEqual(11);
  expect(alerts.filter((a) => !tests.includes(`alertname: ${a}`))).toEqual([]);
});

test("a rule that reads a recorded series follows its recording rule in the same group, so it never sees the last round's value", async () => {
  type Rule = { record?: string; alert?: string; expr: string };
  const file = Bun.YAML.parse(await Bun.file(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`).text()) as {
    groups: { name: string; rules: Rule[] }[];
  };
  const recordedIn = new Map<string, { group: string; index: number }>();
  file.groups.forEach((g) => g.rules.forEach((r, index) => r.record && recordedIn.set(r.record, { group: g.name, index })));
  const misplaced: string[] = [];
  for (const g of file.groups) {
    g.rules.forEach((r, index) => {
      for (const [name, at] of recordedIn) {
        if (!new RegExp(`\\b${name.replace(/[:.]/g, "\\$&")}\\b`).test(r.expr)) continue;
        if (at.group !== g.name || at.index >= index) misplaced.push(`${r.alert ?? r.record} reads ${name}`);
      }
    });
  }
  expect(recordedIn.size).toBeGreaterThanOrEqual(5);
  expect(misplaced).toEqual([]);
});
