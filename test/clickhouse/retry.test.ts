import { expect, setDefaultTimeout, test } from "bun:test";
import { backoffDelay, retryBudgetMs, withRetry } from "../../src/clickhouse/retry.ts";
import { escapeTsv, formatRow } from "../../src/clickhouse/row-format.ts";
import { ddlStatements } from "../../src/clickhouse/migrate.ts";

setDefaultTimeout(60_000);

const policy = { maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2 };

test("ClickHouse write retry with exponential backoff: delays 500, 1000 between three attempts", async () => {
  const delays: number[] = [];
  let calls = 0;
  const out = await withRetry(policy, async () => { calls++; throw new Error("down"); }, () => {}, async (ms) => { delays.push(ms); });
  expect(calls).toBe(3);
  expect(delays).toEqual([500, 1000]);
  expect(out.ok).toBe(false);
  expect(backoffDelay(policy, 3)).toBe(2000);
});

test("a success after a failure stops retrying and reports the attempt", async () => {
  let calls = 0;
  const out = await withRetry(policy, async () => { if (++calls < 2) throw new Error("blip"); }, () => {}, async () => {});
  expect(out).toEqual({ ok: true, attempts: 2 });
});

test("CH_UNREACHABLE_POLICY=wait: while no endpoint answers, no attempt is spent; the wait is capped and reported once", async () => {
  const unreachable = Object.assign(new Error("connect ECONNREFUSED"), { unreachable: true });
  const refused = Object.assign(new Error("Code: 241 memory"), { unreachable: false });
  let calls = 0;
  const delays: number[] = [];
  const waiting: boolean[] = [];
  // 12 tries nobody answers, then one that a server refuses, then success: 2 of 3 attempts spent.
  const out = await withRetry(
    { ...policy, whenUnreachable: "wait" },
    async () => { calls++; if (calls <= 12) throw unreachable; if (calls === 13) throw refused; },
    () => {},
    async (ms) => { delays.push(ms); },
    (w) => waiting.push(w),
  );
  expect(out).toEqual({ ok: true, attempts: 2 });
  expect(calls).toBe(14);
  expect(delays.slice(0, 12)).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000]);
  expect(waiting).toEqual([true, false]);
  // The default policy (the spec's): the same failures spend the attempts, then give up.
  let plain = 0;
  const spec = await withRetry(policy, async () => { plain++; throw unreachable; }, () => {}, async () => {});
  expect([spec.ok, spec.attempts, plain]).toEqual([false, 3, 3]);
});

test("TSV escaping keeps tabs, newlines and backslashes inside one field", () => {
  expect(escapeTsv("a\tb\nc\\d")).toBe("a\\tb\\nc\\\\d");
  expect(escapeTsv("plain")).toBe("plain");
});

test("a row formats as 17 tab-separated columns with exact UInt64 digits, provenance last", () => {
  const line = formatRow({
    cdr_id: "9342d47a-1bab-5709-9869-c840b2eac501", raw_id: "r\t1", device_id: "d", msisdn: "+4915112345678", service_type: "voice",
    radio_access_type: "5G_NR", rat: 9, lac: 1, ci: 2, session_start_time: 1, session_end_time: 2, duration_seconds: 1,
    up_bytes: 18446744073709551615n, down_bytes: 0, total_bytes: 18446744073709551615n, source_ip: 167772161,
  }, 100, 2, 9007199254740991);
  const cols = line.split("\t");
  expect(cols.length).toBe(17);
  expect(cols.slice(15)).toEqual(["2", "9007199254740991"]);
  expect(cols[1]).toBe("r\\t1");
  expect(line).toContain("\t18446744073709551615\t0\t18446744073709551615\t167772161\t0000000100");
  expect(cols.slice(7, 9)).toEqual(["0000000001", "0000000002"]); // DateTime: ten digits, see row-format.ts
});

test("DDL names must be plain identifiers; comments never split statements", () => {
  expect(() => ddlStatements("telecom; DROP", "cdr")).toThrow("plain identifier");
  const stmts = ddlStatements("telecom", "cdr");
  expect(stmts.length).toBe(4);
  expect(stmts[1]).toContain("ReplacingMergeTree");
  expect(stmts[2]).toStartWith("CREATE TABLE IF NOT EXISTS telecom.cdr_offsets\n");
  expect(stmts[3]).toStartWith("CREATE MATERIALIZED VIEW IF NOT EXISTS telecom.cdr_offsets_mv TO telecom.cdr_offsets");
});

test("the cluster DDL's local table has exactly the single-node table's columns; comments hold no statement", () => {
  const single = ddlStatements("telecom", "cdr")[1]!;
  const cluster = ddlStatements("telecom", "cdr", "c1");
  const columns = (s: string) => s.slice(s.indexOf("("), s.indexOf("\nENGINE"));
  expect(cluster.length).toBe(6);
  expect(cluster[0]).toBe("CREATE DATABASE IF NOT EXISTS telecom ON CLUSTER c1");
  expect(columns(cluster[1]!)).toBe(columns(single));
  expect(cluster[1]).toContain("ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/telecom/cdr_local', '{replica}', ingested_at)");
  expect(cluster[2]).toContain("ENGINE = Distributed(c1, telecom, cdr_local, cityHash64(toString(cdr_id)))");
  // The offsets table: the single-node one's columns, replicated, read through a Distributed table.
  expect(columns(cluster[3]!)).toBe(columns(ddlStatements("telecom", "cdr")[2]!));
  expect(cluster[3]).toContain("ReplicatedMergeTree('/clickhouse/tables/{shard}/telecom/cdr_offsets_local', '{replica}')");
  expect(cluster[4]).toContain("ENGINE = Distributed(c1, telecom, cdr_offsets_local, rand())");
  expect(cluster[5]).toContain("TO telecom.cdr_offsets_local");
});

test("the retry budget: every attempt to its deadline and every delay between them", () => {
  expect(retryBudgetMs({ maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2 }, 11_000)).toBe(34_500);
  expect(retryBudgetMs({ maxAttempts: 1, initialDelayMs: 500, backoffFactor: 2 }, 11_000)).toBe(11_000);
  expect(retryBudgetMs({ maxAttempts: 8, initialDelayMs: 1000, backoffFactor: 2 }, 0)).toBe(127_000);
});
