// `cdr-worker audit --resume`, as the hourly CronJob runs it (its args read from the manifest), on
// ClickHouse 18.16 and the 26.9 engine: each run goes on from where the last ended, reading only the
// raw records, DLQ envelopes and DLQ table rows that came after it; records the broker deleted
// before a run read them are counted as expired, not missing.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, deleteRecordsBefore, props, watermarks } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT, waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

/** The command the shipped CronJob runs (deploy/kubernetes/cronjobs/audit.yaml). */
const CRONJOB = Bun.YAML.parse(readFileSync(`${ROOT}/deploy/kubernetes/cronjobs/audit.yaml`, "utf8")) as {
  spec: { jobTemplate: { spec: { template: { spec: { containers: Array<{ args: string[] }> } } } } };
};
const [COMMAND, ...CRONJOB_FLAGS] = CRONJOB.spec.jobTemplate.spec.template.spec.containers[0]!.args;

async function produce(topic: string, partition: number, from: number, count: number, invalid: ReadonlySet<number> = new Set()) {
  const p = new Producer(props);
  try {
    for (let i = from; i < from + count; i++)
      await p.produce(topic, invalid.has(i) ? `not json ${i}` : toJson(withFields({ raw_id: `resume-${partition}-${i}` })), { partition });
  } finally {
    p.close();
  }
}

function audit(n: Names, ...flags: string[]) {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "audit", ...flags], { env: workerEnv(n, { LOG_LEVEL: "warn" }), stdout: "pipe", stderr: "pipe" });
  const lines = p.stdout.toString().trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  return { code: p.exitCode, partitions: lines.slice(0, -1), summary: lines.at(-1), stderr: p.stderr.toString() };
}

/** Each partition's [from, to), records, stored, dead-lettered and expired, as a run reports them. */
const read = (r: ReturnType<typeof audit>) =>
  r.partitions.filter((p) => p.partition !== undefined).map((p) => [p.partition, p.from, p.to, p.records, p.stored, p.dead_lettered, p.expired]);
/** The DLQ table check's ranges and counts, as a run reports them. */
const tableCheck = (r: ReturnType<typeof audit>) => {
  const t = r.partitions.find((p) => p.dlq_table !== undefined);
  return t && { ranges: t.ranges.map((x: { partition: number; from: number; to: number }) => [x.partition, x.from, x.to]), envelopes: t.envelopes, rows: t.rows, missing: t.missing };
};

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, e2eScope(s.url)] as const))("audit --resume on %s", (_name, { ch, names }) => {
  const tableRows = async (n: Names) =>
    Number((await (await ch.query({ query: `SELECT count() FROM ${n.database}.${n.table}_dlq`, format: "TabSeparated" })).text()).trim());
  test("two runs in a row: the second reads only what came after the first, its DLQ from where the first left it; deleted records count as expired", async () => {
    const n = await names("audit-resume");
    const w = await startWorker(workerEnv(n));
    // The DLQ table filled as it runs beside the workers: the audit checks it too, from where it left off.
    const filler = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "fill"], { env: workerEnv(n, { LOG_LEVEL: "warn" }), stdout: "ignore", stderr: "ignore" });
    try {
      await produce(n.raw, 0, 0, 60, new Set([5, 6, 7]));
      await produce(n.raw, 1, 0, 30);
      await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 60 && s.partitions["1"]?.committed_offset === 30, 30_000, "the first records committed");

      expect([COMMAND, ...CRONJOB_FLAGS]).toEqual(["audit", "--resume"]);
      await waitFor(async () => ((await tableRows(n)) === 3 ? true : undefined), 30_000, "the three envelopes in the DLQ table");
      const first = audit(n, ...CRONJOB_FLAGS);
      expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: "" });
      expect(read(first)).toEqual([
        [0, 0, 60, 60, 57, 3, 0],
        [1, 0, 30, 30, 30, 0, 0],
        [2, 0, 0, 0, 0, 0, 0],
      ]);
      expect(first.summary).toMatchObject({ audit: "clean", resumed: false, expired: 0 });
      expect(tableCheck(first)).toEqual({ ranges: [[0, 0, 3]], envelopes: 3, rows: 3, missing: 0 });
      // Kept: the raw offsets audited up to, and past the DLQ's three envelopes (its one partition; its
      // transaction's marker after them is no envelope): each was of an audited record.
      expect(watermarks(n.dlq, 0).high).toBe(4);
      expect(Number(committedOffsets(`${n.group}-audit`, n.dlq, 1).get(0))).toBe(3);
      expect([...committedOffsets(`${n.group}-audit`, n.raw, 3)].map(([p, o]) => [p, Number(o)])).toEqual([[0, 60], [1, 30], [2, 0]]);

      await produce(n.raw, 0, 60, 40, new Set([70, 80]));
      await produce(n.raw, 2, 0, 10);
      await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 100 && s.partitions["2"]?.committed_offset === 10, 30_000, "the next records committed");
      await waitFor(async () => ((await tableRows(n)) === 5 ? true : undefined), 30_000, "two more envelopes in the DLQ table");
      const second = audit(n, ...CRONJOB_FLAGS);
      expect({ code: second.code, stderr: second.stderr }).toEqual({ code: 0, stderr: "" });
      // Only what came after the first run: partition 0's two new envelopes, not its three old ones.
      expect(read(second)).toEqual([
        [0, 60, 100, 40, 38, 2, 0],
        [1, 30, 30, 0, 0, 0, 0],
        [2, 0, 10, 10, 10, 0, 0],
      ]);
      expect(second.summary).toMatchObject({ audit: "clean", resumed: true, expired: 0 });
      // The table's check from where the first ended, past the first transaction's marker.
      const table = tableCheck(second)!;
      expect(table.ranges[0]!.slice(0, 2)).toEqual([0, 3]);
      expect([table.envelopes, table.rows, table.missing]).toEqual([2, 2, 0]);

      // Stored, then deleted before a run read them: expired, not missing.
      await produce(n.raw, 0, 100, 20);
      await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 120, 30_000, "20 more committed");
      await deleteRecordsBefore(n.raw, { 0: 110 });
      const third = audit(n, ...CRONJOB_FLAGS);
      expect({ code: third.code, stderr: third.stderr }).toEqual({ code: 0, stderr: "" });
      expect(read(third)[0]).toEqual([0, 110, 120, 10, 10, 0, 10]);
      expect(third.summary).toMatchObject({ audit: "clean", resumed: true, expired: 10, missing: 0 });

      // --since reads from its time again, whatever was kept; --partitions is refused with --resume.
      const again = audit(n, "--resume", "--since", "2000-01-01T00:00:00Z");
      expect(read(again).map((r) => r.slice(0, 4))).toEqual([[0, 110, 120, 10], [1, 0, 30, 30], [2, 0, 10, 10]]);
      expect(again.summary).toMatchObject({ audit: "clean", resumed: false });
      const refused = audit(n, "--resume", "--partitions", "0");
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("--resume audits every partition from where the last run ended: not with --partitions");
      expect(await w.stop()).toBe(0);
    } finally {
      w.proc.kill("SIGKILL");
      filler.kill("SIGKILL");
    }
  }, 120_000);
});
