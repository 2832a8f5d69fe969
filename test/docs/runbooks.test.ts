// docs/runbooks.md has one anchored section per alert of the rules file, and each alert's
// runbook_url points at its own section; the page's inhibit table names every inhibit rule of
// deploy/alertmanager/alertmanager.yml with the alerts it silences.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

type Rule = { alert?: string; annotations?: Record<string, string> };
const rulesOf = (text: string) =>
  (Bun.YAML.parse(text) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules).filter((r) => r.alert);
const page = readFileSync(`${ROOT}/docs/runbooks.md`, "utf8");
const rulesText = readFileSync(`${ROOT}/deploy/prometheus/cdr-worker.rules.yml`, "utf8");

/** What is wrong between the page and a rules file: alerts without a section or link, sections without an alert. */
function mismatches(runbooks: string, rules: Rule[]): string[] {
  const sections = [...runbooks.matchAll(/^## (\S+)$/gm)].map((m) => m[1]!);
  const out: string[] = [];
  for (const r of rules) {
    if (!sections.includes(r.alert!)) out.push(`${r.alert}: no section`);
    const want = `{{ $externalLabels.cdrworker_docs }}/runbooks.md#${r.alert!.toLowerCase()}`;
    if (r.annotations?.runbook_url !== want) out.push(`${r.alert}: runbook_url ${r.annotations?.runbook_url}`);
  }
  for (const s of sections) if (!rules.some((r) => r.alert === s)) out.push(`${s}: a section for no alert`);
  return out;
}

test("every alert has its anchored section and links it; every section is an alert's; a changed copy shows", () => {
  expect(mismatches(page, rulesOf(rulesText))).toEqual([]);
  expect(rulesOf(rulesText).length).toBe(21);
  // Drift the test exists for: an alert renamed in the rules, a section dropped from the page.
  expect(mismatches(page, rulesOf(rulesText.replace("alert: CdrWorkerDown", "alert: CdrWorkerGone")))).toContain("CdrWorkerGone: no section");
  expect(mismatches(page.replace("## CdrWorkerEventLoopLag\n", ""), rulesOf(rulesText))).toContain("CdrWorkerEventLoopLag: no section");
  // The external label the links are built from is one setting, an address compose requires.
  const prom = Bun.YAML.parse(readFileSync(`${ROOT}/deploy/prometheus/prometheus.yml`, "utf8")) as any;
  expect(prom.global.external_labels.cdrworker_docs).toBe("${CDRWORKER_DOCS_URL}");
  const compose = Bun.YAML.parse(readFileSync(`${ROOT}/compose.yml`, "utf8")) as any;
  expect(compose.services.prometheus.command).toContain("--enable-feature=expand-external-labels");
  expect(compose.services.prometheus.environment.CDRWORKER_DOCS_URL).toStartWith("${CDRWORKER_DOCS_URL:?");
});

/** The alerts for a whole group (their `job`), which the rules aggregate to one. */
const GROUP_WIDE = ["CdrWorkerNoneConsuming", "CdrWorkerClickHouseRetriesExhausted", "CdrWorkerClickHouseInsertsFailing",
  "CdrWorkerClickHouseRefusesWorker"];

test("the page's inhibit table is alertmanager.yml's inhibit rules", () => {
  const am = Bun.YAML.parse(readFileSync(`${ROOT}/deploy/alertmanager/alertmanager.yml`, "utf8")) as {
    inhibit_rules: { source_matchers: string[]; target_matchers: string[]; equal: string[] }[];
  };
  const rows = page.split("\n").filter((l) => /^\| CdrWorker\w+ \|/.test(l));
  expect(rows.length).toBe(am.inhibit_rules.length);
  for (const rule of am.inhibit_rules) {
    const source = /alertname="(\w+)"/.exec(rule.source_matchers[0]!)![1]!;
    const row = rows.find((r) => r.startsWith(`| ${source} |`));
    expect(row).toBeDefined();
    // A cause of the whole group silences on every worker of it; a worker's own, on that worker.
    expect(rule.equal).toEqual([GROUP_WIDE.includes(source) ? "job" : "instance"]);
    const targets = /alertname=~"([^"]+)"/.exec(rule.target_matchers[0]!)![1]!;
    if (targets === "CdrWorker.+") expect(row).toContain("every other alert of the same worker");
    else expect(row!.split(" | ")[1]!.split(", ").sort()).toEqual(targets.split("|").sort());
  }
});
