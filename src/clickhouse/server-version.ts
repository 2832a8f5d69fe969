/**
 * What a ClickHouse server's version (`SELECT version()`) means for the worker's requests. 18.16
 * refuses a setting it does not know (UNKNOWN_SETTING), and current releases changed defaults the
 * worker must not inherit, so the settings of an insert follow the version of the endpoint it goes to.
 * Pure: test/clickhouse/server-version.test.ts holds each row.
 */
import type { ClickHouseSettings } from "@clickhouse/client";

/** The oldest release a suite runs on (docs/compatibility.md). */
export const OLDEST_TESTED = "18.16";

/** [major, minor] of "26.9.2.1", or null for text that is not a version. */
export function parseVersion(version: string): [number, number] | null {
  const m = /^(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2])] : null;
}

function atLeast(version: string, major: number, minor: number): boolean {
  const v = parseVersion(version);
  return v !== null && (v[0] > major || (v[0] === major && v[1] >= minor));
}

/** True when the server predates every release a suite runs on. */
export function olderThanTested(version: string): boolean {
  const [major, minor] = parseVersion(OLDEST_TESTED)!;
  return parseVersion(version) !== null && !atLeast(version, major, minor);
}

/**
 * The settings of every insert to a server of this version. The body is RowBinary, which no input
 * setting reads differently (a DateTime is its UInt32), so only how the insert is acknowledged:
 * - `async_insert=0` since 21.11, where the setting exists (26.x defaults it to 1): the worker
 *   batches itself, and the server's queue would add latency, its own deduplication rules and
 *   errors reported after the acknowledgement.
 * - `send_progress_in_http_headers=0` on every version (18.16 has it): an insert writes no body,
 *   so its status goes out once it has ended, a failure as a status and a header, whatever the
 *   user's profile sets. An exception in a 200 body is still read as one (writer.ts).
 *   (`wait_end_of_query=1` would buffer the answer in a 1 MiB chunk counted against the query's
 *   memory limit, and an insert has no answer to buffer.)
 */
export function insertSettings(version: string): ClickHouseSettings {
  const status: ClickHouseSettings = { send_progress_in_http_headers: 0 };
  return atLeast(version, 21, 11) ? { ...status, async_insert: 0 } : status;
}

/**
 * The oldest release on which an insert's `max_execution_time` is known to end it on the server:
 * test/clickhouse/insert-life.test.ts shows the 26.9 engine end an insert at its limit and 18.16 run
 * one past it (18.16 checks the limit for SELECT only). Releases between are not relied on.
 */
export const INSERT_LIFE_BOUNDED_SINCE = "26.9";

/** True when an insert sent with max_execution_time has ended on this server once that time has passed. */
export function boundsInsertLife(version: string): boolean {
  const [major, minor] = parseVersion(INSERT_LIFE_BOUNDED_SINCE)!;
  return atLeast(version, major, minor);
}
