// The short variant of scripts/chaos/kill-loop.ts: the worker killed with kill -9 at random moments
// while it drains a backlog, restarted each time, on ClickHouse 18.16 and on the 26.9 engine.
// Counted with merges stopped and without FINAL: nothing lost, no row and no envelope twice, and
// `cdr-worker audit` agrees. (The long run: --records 300000 --kills 20, docs/sizing.md "Performance".)
import { expect, setDefaultTimeout, test } from "bun:test";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s.url] as const))("%s: 3 kills during 30 000 records: every record once, by count and by audit", async (_name, url) => {
  const p = Bun.spawn(["bun", `${ROOT}/scripts/chaos/kill-loop.ts`, "--records", "30000", "--kills", "3"], {
    env: { ...process.env, CLICKHOUSE_URL: url },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  const report = JSON.parse(out.trim().split("\n").at(-1) || "null");
  expect({ code, report: report && { ...report, seconds: 0 } }).toMatchObject({
    code: 0,
    report: { delivery: "exactly-once", kills: 3, rows_twice: 0, envelopes_twice: 0, lost: 0, ok: true, audit: { exit_code: 0, audit: "clean" } },
  });
  expect(err).not.toContain('"level":"error"');
}, 300_000);
