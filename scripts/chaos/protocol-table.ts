/**
 * Exactly-once's end-to-end scenarios on every group protocol, as a table: the kill -9 loop, lost
 * insert answers while a second worker joins, a worker cut off from Kafka while another takes over,
 * and a revocation that cannot settle while ClickHouse is down (frozen through the fence, and at a
 * 45 s group session). It runs their tests (which assert every count themselves) with
 * CDR_SCENARIO_REPORT set, and prints, per scenario and protocol: rows stored, rows twice (rows −
 * distinct Kafka offsets, merges stopped, no FINAL), envelopes, envelopes twice (envelopes −
 * distinct sources, read_committed) and the longest stall (no row stored while some were to come).
 * Usage: bun scripts/chaos/protocol-table.ts   (services running: bash scripts/services.sh start)
 */
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ScenarioFigures } from "../../test/support/scenario-meter.ts";

const ROOT = join(import.meta.dir, "../..");
const FILES = [
  "test/chaos/kill-loop.test.ts",
  "test/e2e/lost-answers.test.ts",
  "test/e2e/kafka-cut.test.ts",
  "test/e2e/fenced-revocation.test.ts",
];
const report = join(mkdtempSync(join(tmpdir(), "protocol-table-")), "scenarios.jsonl");
const run = Bun.spawnSync(["bun", "test", ...FILES], {
  cwd: ROOT,
  env: { ...process.env, CDR_TEST_SERVICES_UP: "1", CDR_SCENARIO_REPORT: report },
  stdout: "inherit",
  stderr: "inherit",
});
const lines: ScenarioFigures[] = existsSync(report)
  ? readFileSync(report, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as ScenarioFigures)
  : [];
console.log("\n| scenario | protocol | rows stored | rows twice | envelopes | envelopes twice | longest stall |");
console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
for (const l of lines)
  console.log(`| ${l.scenario} | ${l.protocol} | ${l.rows} | ${l.rows_twice} | ${l.envelopes} | ${l.envelopes_twice} | ${l.longest_stall_s} s |`);
process.exit(run.exitCode ?? 1);
