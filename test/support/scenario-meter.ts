/**
 * An end-to-end scenario's figures for the table of scenarios by group protocol
 * (`bun scripts/chaos/protocol-table.ts`): rows stored and rows twice as billing counts them,
 * envelopes and envelopes twice, and the longest stall, the longest time no row was stored while
 * some were still to come. A line is written only when CDR_SCENARIO_REPORT names a file; the
 * tests assert the counts themselves either way.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { appendFileSync } from "node:fs";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { header, readCommitted } from "./kafka.ts";

export interface ScenarioFigures {
  scenario: string;
  protocol: string;
  rows: number;
  rows_twice: number;
  envelopes: number;
  envelopes_twice: number;
  longest_stall_s: number;
}

/** How often the table's count is read: the stall is known to this much. */
const SAMPLE_MS = 250;

/**
 * Reads the table's count() every SAMPLE_MS from now until `stop`, which takes the count the run
 * ends with: a stall is a span in which the count did not grow while it was below that.
 */
export function stallMeter(ch: ClickHouseClient, n: { database: string; table: string }) {
  const samples: Array<{ at: number; rows: number }> = [];
  let running = true;
  const sampling = (async () => {
    while (running) {
      const r = await ch.query({ query: `SELECT count() AS c FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
      samples.push({ at: performance.now(), rows: Number((await r.json<{ c: string }>())[0]!.c) });
      await Bun.sleep(SAMPLE_MS);
    }
  })();
  return {
    async stop(finalRows: number): Promise<number> {
      running = false;
      await sampling;
      return +(longestStallMs(samples, finalRows) / 1000).toFixed(1);
    },
  };
}

/** The longest span between a count's first sample and the sample that saw it grow, below `finalRows`. */
export function longestStallMs(samples: ReadonlyArray<{ at: number; rows: number }>, finalRows: number): number {
  let longest = 0;
  let since = samples[0];
  for (const s of samples) {
    if (!since || s.rows > since.rows) since = s;
    else if (s.rows < finalRows) longest = Math.max(longest, s.at - since.at);
  }
  return longest;
}

/** The DLQ as a read_committed reader sees it: its envelopes, and their distinct sources (partition/offset). */
export async function dlqCount(topic: string): Promise<{ envelopes: number; sources: number }> {
  const dlq = await readCommitted(topic);
  const sources = new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`));
  return { envelopes: dlq.length, sources: sources.size };
}

/** A scenario's figures from what it stored (e2e.ts's storedCounts), its DLQ (dlqCount) and its stall. */
export function storedFigures(
  counts: { rows: number; offsetRows: number; offsets: number },
  dlq: { envelopes: number; sources: number },
  longestStallS: number,
): Omit<ScenarioFigures, "scenario" | "protocol"> {
  return {
    rows: counts.rows,
    rows_twice: counts.offsetRows - counts.offsets,
    envelopes: dlq.envelopes,
    envelopes_twice: dlq.envelopes - dlq.sources,
    longest_stall_s: longestStallS,
  };
}

/** Appends the figures to CDR_SCENARIO_REPORT, if set. */
export function reportScenario(figures: ScenarioFigures): void {
  const file = process.env.CDR_SCENARIO_REPORT;
  if (file) appendFileSync(file, JSON.stringify(figures) + "\n");
}
