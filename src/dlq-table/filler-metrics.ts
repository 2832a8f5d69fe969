/**
 * The DLQ table filler's /metrics (`dlq fill`): how far the table stands behind the DLQ topic, and
 * what its inserts did. CdrWorkerDlqTableBehind and CdrWorkerDlqTableInsertsFailing watch them
 * (deploy/prometheus/cdr-worker.rules.yml; docs/runbooks.md).
 */
import { Exposition } from "../stats/exposition.ts";
import type { DlqFiller } from "./filler.ts";

export function fillerMetricsText(filler: Pick<DlqFiller, "counts" | "lag" | "buffered">): string {
  const { metric, lines } = new Exposition();
  const c = filler.counts;
  const lag = filler.lag().sort((a, b) => a.partition - b.partition);
  metric(
    "cdr_worker_dlq_table_lag_records",
    "gauge",
    "DLQ records of an owned partition past the DLQ table's position (the topic's end as last fetched).",
    lag.map((l) => [{ partition: l.partition }, l.records]),
  );
  metric(
    "cdr_worker_dlq_table_lag_seconds",
    "gauge",
    "Seconds since the DLQ table last held every record of an owned partition (or since it was assigned).",
    lag.map((l) => [{ partition: l.partition }, Math.round(l.seconds)]),
  );
  const counter = (name: string, help: string, value: number) => metric(name, "counter", help, [[{}, value]]);
  counter("cdr_worker_dlq_table_rows_stored_total", "Rows the filler stored in the DLQ table.", c.stored);
  counter(
    "cdr_worker_dlq_table_rows_unreadable_total",
    "Rows stored whose record was not an envelope, or had a field mended to be stored (their unreadable says why).",
    c.unreadable,
  );
  const refused = "Rows the server refused alone, each stored as a row that says so in its place.";
  counter("cdr_worker_dlq_table_rows_refused_total", refused, c.refused);
  counter("cdr_worker_dlq_table_inserts_total", "Inserts the filler sent.", c.inserts);
  counter("cdr_worker_dlq_table_inserts_failed_total", "Inserts that failed, each tried again.", c.failedInserts);
  const lost = "Inserts whose answer was lost, checked in the table.";
  counter("cdr_worker_dlq_table_lost_answers_total", lost, c.lostAnswers);
  counter("cdr_worker_dlq_table_records_skipped_total", "Records read that the table already held.", c.skipped);
  const buffered: Array<[Record<string, string>, number]> = [[{}, filler.buffered]];
  metric("cdr_worker_dlq_table_buffered_bytes", "gauge", "Rows read and not yet stored, in bytes.", buffered);
  return lines.join("\n") + "\n";
}
