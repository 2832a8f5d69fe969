/**
 * A ClickHouse answer read with a limit. The client reads a body whole, whatever its size; a broken
 * proxy's endless body, or a version string of megabytes that would land in metric labels, must
 * cost a bounded read and a clear error instead.
 */
import type { ClickHouseClient, ClickHouseSettings } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";

/** A one-line answer: a version, a count. */
export const SMALL_ANSWER_BYTES = 64 * 1024;
/** A list the worker asks for: its running query ids, a table's columns. */
export const LIST_ANSWER_BYTES = 4 * 1024 * 1024;
/** Rows the replay check or a lost insert's check reads back: a batch's, or a partition's since its commit. */
export const ROWS_ANSWER_BYTES = 256 * 1024 * 1024;

/** The body of `stream` as text; past `limit` bytes the stream is dropped and the read refused. */
export async function readCapped(stream: AsyncIterable<unknown>, limit: number, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of stream) {
    const chunk = typeof c === "string" ? Buffer.from(c) : (c as Buffer);
    total += chunk.length;
    if (total > limit) {
      (stream as { destroy?: () => void }).destroy?.();
      const message = `${what}: the answer is over ${limit} bytes; not a ClickHouse answer`;
      throw new CdrWorkerError("CLICKHOUSE_ANSWER", message, true);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A query's answer (TabSeparated unless `format` says), at most `limit` bytes; errors as query() throws them. */
export async function queryText(
  ch: ClickHouseClient,
  query: string,
  limit: number,
  clickhouse_settings?: ClickHouseSettings,
  format: "TabSeparated" | "JSONEachRow" = "TabSeparated",
): Promise<string> {
  const settings = clickhouse_settings ? { clickhouse_settings } : {};
  const r = await ch.exec({ query: `${query} FORMAT ${format}`, ...settings });
  return readCapped(r.stream, limit, query.slice(0, 80));
}

/** What `SELECT version()` answered, as a version may look: digits, dots and a short suffix. */
export function versionOf(answer: string): string {
  const v = answer.trim();
  if (!/^\d+(\.\d+){1,4}[\w.+-]{0,32}$/.test(v)) {
    const said = JSON.stringify(v.slice(0, 80));
    throw new CdrWorkerError("CLICKHOUSE_ANSWER", `SELECT version() answered ${said}: not a version`, true);
  }
  return v;
}
