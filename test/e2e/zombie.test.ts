// A zombie drops what it held; it never flushes it. One worker holds rows it has not flushed yet
// and is frozen (SIGSTOP) past its session and past max.poll.interval.ms. The group gives its
// partitions to a second worker, whose replay check runs and which stores every record. Thawed,
// the first worker's flush interval and timers are due at once. It must hear that its assignment
// was lost and drop those rows, not insert them after the new owner's check. The count is taken by
// offset from the offsets table, which merges never collapse: every record once, none missing,
// none dead-lettered, and both workers stop cleanly. Then the same end reached the other way: a
// revocation that cannot settle (ClickHouse unreachable, CH_UNREACHABLE_POLICY=wait) keeps polling,
// is given up before the group's rebalance timeout, and its waiting batch is dropped, not inserted
// when ClickHouse answers again.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, committedOffsets } from "../support/kafka.ts";
import { CLICKHOUSE_URL, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, statsWhen, workerEnv, type Names, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

const GROUP_TIMEOUTS = {
  KAFKA_PROP_SESSION_TIMEOUT_MS: "6000",
  KAFKA_PROP_MAX_POLL_INTERVAL_MS: "7000",
  KAFKA_PROP_HEARTBEAT_INTERVAL_MS: "1000",
};

async function offsetsStored(n: Names): Promise<{ rows: number; offsets: number }> {
  const rs = await ch.query({
    query: `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${n.database}.${n.table}_offsets`,
    format: "JSONEachRow",
  });
  const [r] = await rs.json<{ rows: string; offsets: string }>();
  return { rows: Number(r!.rows), offsets: Number(r!.offsets) };
}

describe("partitions a worker can no longer own", () => {
  test("a worker frozen past its session and max.poll.interval.ms drops the rows it held when thawed: nothing stored twice, nothing lost", async () => {
    const n = await names("zombie");
    // The zombie's batch is due 5 s after its last flush, so it is overdue the moment it thaws.
    const a = await startWorker(workerEnv(n, { ...GROUP_TIMEOUTS, BATCH_SIZE: "10000", BATCH_FLUSH_INTERVAL_SECONDS: "5" }));
    const workers: RunningWorker[] = [a];
    try {
      await statsWhen(a, (s) => s.assigned_partitions.length === 3, 30_000, "a owns every partition");
      // One record flushed first, so the interval starts now and the next records stay held.
      const first = await produceSynthetic(n.raw, 1, 0, 1);
      await statsWhen(a, (s) => s.total_clickhouse === first.valid && s.commits > 0, 30_000, "a's first record stored");
      const rest = await produceSynthetic(n.raw, 3000, 0, 2);
      const held = await statsWhen(a, (s) => s.buffered_rows === rest.valid, 4_000, "a holding every record");
      expect(held.total_clickhouse).toBe(first.valid);
      a.proc.kill("SIGSTOP");
      const frozenAt = Date.now();

      const b = await startWorker(workerEnv(n, { ...GROUP_TIMEOUTS, BATCH_FLUSH_INTERVAL_SECONDS: "0.5" }));
      workers.push(b);
      const total = first.valid + rest.valid;
      await statsWhen(b, (s) => s.assigned_partitions.length === 3, 40_000, "b owns every partition");
      await waitFor(async () => ((await offsetsStored(n)).offsets === total ? true : undefined), 30_000, "b stored every record");
      const committed = () => [...committedOffsets(n.group, n.raw, 3).values()].reduce((s, o) => s + (o > 0n ? o : 0n), 0n);
      await waitFor(() => (committed() === BigInt(total) ? true : undefined), 30_000, "b committed every offset");
      // Past max.poll.interval.ms as well as the session.
      await Bun.sleep(Math.max(0, 8_000 - (Date.now() - frozenAt)));
      a.proc.kill("SIGCONT");

      // The group settles with both members; a's rejoin finds every offset committed.
      const after = await statsWhen(a, (s) => s.assigned_partitions.length > 0 && s.buffered_rows === 0, 30_000, "a rejoined");
      await statsWhen(b, (s) => s.assigned_partitions.length > 0 && s.buffered_rows === 0, 30_000, "b settled");
      expect(await Promise.all(workers.map((w) => w.stop()))).toEqual([0, 0]);
      const stored = await offsetsStored(n);
      expect(stored).toEqual({ rows: total, offsets: total });
      expect(after.assignments_lost).toBeGreaterThan(0);
      expect(after.lost_rows_dropped).toBe(rest.valid);
      expect(after.loop_stalls).toBeGreaterThan(0);
      expect(a.logs.some((l) => l.includes('"partitions lost'))).toBe(true);
      expect(committed()).toBe(BigInt(total));
      expect((await committedCount(n.dlq))).toBe(0);
    } finally {
      a.proc.kill("SIGCONT");
    }
  }, 150_000);

  test("a revocation that cannot settle (ClickHouse unreachable) keeps polling, and is given up before the rebalance timeout: its batch never goes", async () => {
    const n = await names("stuckrevoke");
    const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
    const a = await startWorker(workerEnv(n, {
      ...GROUP_TIMEOUTS, CLICKHOUSE_URL: proxy.url, CLICKHOUSE_REQUEST_TIMEOUT_MS: "1000",
      CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0", CH_UNREACHABLE_POLICY: "wait",
    }));
    const workers: RunningWorker[] = [a];
    try {
      await statsWhen(a, (s) => s.assigned_partitions.length === 3, 30_000, "a owns every partition");
      proxy.down();
      const sent = await produceSynthetic(n.raw, 3000, 0, 3);
      await statsWhen(a, (s) => s.buffered_rows > 0, 20_000, "a's batches waiting for ClickHouse");
      const b = await startWorker(workerEnv(n, { ...GROUP_TIMEOUTS, BATCH_FLUSH_INTERVAL_SECONDS: "0.5" }));
      workers.push(b);
      // a cannot settle its revocation, and gives it up before the rebalance timeout (max.poll.interval.ms).
      const lost = await statsWhen(a, (s) => s.assignments_lost > 0 && s.buffered_rows === 0, 40_000, "a's assignment lost");
      expect(lost.lost_rows_dropped).toBeGreaterThan(0);
      expect(a.proc.exitCode).toBeNull();
      // ClickHouse answers a again: the batch it dropped must not go now.
      proxy.up();
      await waitFor(async () => ((await offsetsStored(n)).offsets === sent.valid ? true : undefined), 40_000, "every record stored");
      // One more record, stored by whichever worker owns its partition.
      await produceSynthetic(n.raw, 1, 0, 4);
      await waitFor(async () => ((await offsetsStored(n)).offsets === sent.valid + 1 ? true : undefined), 40_000, "the record after the return stored");
      for (const w of workers) await statsWhen(w, (s) => s.buffered_rows === 0, 20_000, "workers settled");
      expect(await Promise.all(workers.map((w) => w.stop()))).toEqual([0, 0]);
      expect(await offsetsStored(n)).toEqual({ rows: sent.valid + 1, offsets: sent.valid + 1 });
      expect((await committedCount(n.dlq))).toBe(0);
    } finally {
      proxy.down();
    }
  }, 150_000);
});
