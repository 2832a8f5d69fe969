// The Prometheus text from a StatsSource, without services: lag, the delivery mode, replays
// skipped, the scheduled audit's runs and findings (the manual's list is held by scrape.test.ts).
import { expect, setDefaultTimeout, test } from "bun:test";
import { metricsText } from "../../src/stats/metrics.ts";
import { statsSource as source } from "../support/stats-source.ts";

setDefaultTimeout(60_000);

test("the metrics say the same: lag, mode, replays skipped, the audit's runs and findings", () => {
  const m = metricsText(source());
  for (const line of [
    'cdr_worker_partition_lag{partition="0"} 5',
    "cdr_worker_exactly_once 1",
    "cdr_worker_replays_skipped_total 4",
    "cdr_worker_replay_checks_pending 1",
    'cdr_worker_audit_runs_total{result="failed"} 1',
    'cdr_worker_audit_findings{finding="stored_twice"} 1',
    "cdr_worker_audit_last_run_timestamp_seconds 1764000000",
  ])
    expect(m.split("\n")).toContain(line);
});
