// Settings by server version: each row is a release the worker may meet.
import { expect, setDefaultTimeout, test } from "bun:test";
import { insertSettings, olderThanTested, parseVersion } from "../../src/clickhouse/server-version.ts";

setDefaultTimeout(60_000);

const status = { send_progress_in_http_headers: 0 } as const;
test.each([
  ["18.16.1", status, false],
  ["21.8.15.7", status, false],
  ["21.11.1.1", { ...status, async_insert: 0 }, false],
  ["26.9.2.1", { ...status, async_insert: 0 }, false],
  ["18.14.19", status, true],
  ["1.1.54394", status, true],
] as const)("ClickHouse %s: insert settings %j, older than tested: %p", (version, settings, older) => {
  expect(insertSettings(version)).toEqual(settings);
  expect(olderThanTested(version)).toBe(older);
});

test("text that is not a version is neither parsed nor called old", () => {
  expect(parseVersion("not a version")).toBeNull();
  expect(olderThanTested("")).toBe(false);
  expect(parseVersion("26.9.2.1")).toEqual([26, 9]);
});
