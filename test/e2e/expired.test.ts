// Records the broker deletes before the worker fetches them (retention outlived, DeleteRecords) are
// counted, said and exported, partition by partition: at an assignment that starts below the log
// start, and while the worker runs with ClickHouse away under the production profile. Every offset
// of a partition ends somewhere: stored once, or counted as expired. A transactional producer's
// markers and aborted records are passed over, counted, and never taken for a loss.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { Transactions } from "../../src/kafka/transaction.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, deleteRecordsBefore, props, watermarks } from "../support/kafka.ts";
import { productionProfile } from "../support/profile.ts";
import { CLICKHOUSE_URL, uniqueName, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv, type Names, type RunningWorker, withFetchDebug } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();
const PARTITIONS = [0, 1, 2];

/** `count` records on each partition, raw_ids unique to the call. */
async function produceEach(topic: string, count: number, tag: string): Promise<void> {
  const p = new Producer({ ...props, "linger.ms": "5" });
  try {
    for (const partition of PARTITIONS)
      for (let i = 0; i < count; i += 1000) {
        const n = Math.min(1000, count - i);
        const values = Array.from({ length: n }, (_, j) => toJson(withFields({ raw_id: `${tag}-${partition}-${i + j}` })));
        await Promise.all(values.map((v) => p.produce(topic, v, { partition })));
      }
  } finally {
    p.close();
  }
}

/** Rows per partition as billing counts them, beside distinct offsets. */
async function storedByPartition(n: Names): Promise<Map<number, { rows: number; offsets: number }>> {
  const q = `SELECT kafka_partition AS p, count() AS rows, uniqExact(kafka_offset) AS offsets FROM ${n.database}.${n.table} GROUP BY p`;
  const rs = await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ p: number; rows: string; offsets: string }>();
  return new Map(rs.map((r) => [Number(r.p), { rows: Number(r.rows), offsets: Number(r.offsets) }]));
}

function expiredLines(w: RunningWorker): Array<{ partition: number; from: number; to: number; records: number }> {
  return w.logs.filter((l) => l.includes("deleted by the broker before this worker fetched them")).map((l) => JSON.parse(l));
}

async function expiredMetric(w: RunningWorker, partition: number): Promise<number> {
  const text = await (await fetch(`${w.statsUrl}/metrics`)).text();
  const m = text.match(new RegExp(`^cdr_worker_records_expired_total\\{partition="${partition}"\\} (\\d+)$`, "m"));
  return m ? Number(m[1]) : NaN;
}

test.each(["exactly-once", "at-least-once"])(
  "%s: an assignment whose commit lies below the log start counts exactly the records deleted before it, per partition",
  async (delivery) => {
    const n = await names(`expired-${delivery}`);
    const env = workerEnv(n, { DELIVERY: delivery });
    await produceEach(n.raw, 10, "before");
    const first = await startWorker(env);
    await statsWhen(first, (s) => PARTITIONS.every((p) => s.partitions[p]?.committed_offset === 10), 30_000, "10 committed on each");
    expect(await first.stop()).toBe(0);
    await produceEach(n.raw, 1000, "after");
    await deleteRecordsBefore(n.raw, { 0: 900, 1: 900, 2: 900 });
    const w = await startWorker(env);
    const s = await statsWhen(
      w,
      (s) => PARTITIONS.every((p) => s.partitions[p]?.committed_offset === 1010 && s.partitions[p]?.expired === 890),
      60_000,
      "the rest committed, the deleted counted",
    );
    expect([s.records_expired, s.offsets_passed_over, s.total_dlq, s.total_clickhouse]).toEqual([3 * 890, 0, 0, 3 * 110]);
    expect(expiredLines(w).sort((a, b) => a.partition - b.partition).map((l) => [l.partition, l.from, l.to, l.records])).toEqual(
      PARTITIONS.map((p) => [p, 10, 900, 890]),
    );
    for (const p of PARTITIONS) expect(await expiredMetric(w, p)).toBe(890);
    const stored = await storedByPartition(n);
    for (const p of PARTITIONS) expect(stored.get(p)).toEqual({ rows: 120, offsets: 120 });
    expect(await w.stop()).toBe(0);
  },
  120_000,
);

test("production profile, ClickHouse away while the broker deletes what the worker did not hold: each offset stored once or counted expired", async () => {
  const n = await names("expired-running");
  const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
  const w = await startWorker(withFetchDebug(workerEnv(n, { ...productionProfile(), CLICKHOUSE_URL: proxy.url })));
  try {
    await produceEach(n.raw, 10, "first");
    await statsWhen(w, (s) => s.total_clickhouse === 30, 30_000, "the first records stored");
    proxy.down();
    // More than the worker holds: its batches fill, it stops polling, and librdkafka's queue is dropped at the pause.
    await produceEach(n.raw, 20_000, "during");
    await waitFor(() => (w.logs.some((l) => l.includes("consumption paused until one does")) ? true : undefined), 60_000, "paused");
    const ends = PARTITIONS.map((p) => watermarks(n.raw, p).high);
    expect(ends).toEqual([20_010, 20_010, 20_010]);
    await deleteRecordsBefore(n.raw, { 0: 19_000, 1: 19_000, 2: 19_000 });
    proxy.up();
    // The commit passes a gap at once; the gap is told apart at the next read of the log starts.
    const s = await statsWhen(
      w,
      (s) => PARTITIONS.every((p) => s.partitions[p]?.committed_offset === 20_010 && s.partitions[p].durable_clickhouse + s.partitions[p].expired === 20_010),
      90_000,
      "committed to the end, every offset stored or expired",
    );
    const stored = await storedByPartition(n);
    for (const p of PARTITIONS) {
      const pc = s.partitions[p];
      // Billing's count and the distinct offsets agree (none twice); stored and expired make the whole partition.
      expect(stored.get(p)!.rows).toBe(stored.get(p)!.offsets);
      expect(stored.get(p)!.rows + pc.expired).toBe(20_010);
      console.log(`partition ${p}: ${stored.get(p)!.rows} stored, ${pc.expired} expired`);
      expect(pc.expired).toBeGreaterThan(0);
      expect(await expiredMetric(w, p)).toBe(pc.expired);
      const said = expiredLines(w).filter((l) => l.partition === p);
      expect(said.reduce((sum, l) => sum + l.records, 0)).toBe(pc.expired);
      expect(said.every((l) => l.to <= 19_000)).toBe(true);
    }
    // Deleted before they were fetched is no skip: nothing read again, nothing dead-lettered.
    expect([s.total_dlq, s.offsets_passed_over, s.offsets_skipped]).toEqual([0, 0, 0]);
    expect(await committedCount(n.dlq)).toBe(0);
    expect(await w.stop()).toBe(0);
  } finally {
    proxy.down();
    w.proc.kill("SIGKILL");
  }
}, 200_000);

test("a transactional producer's committed and aborted transactions over 10,000 records: none taken for expired, every marker and aborted record passed over", async () => {
  const n = await names("expired-txn");
  const producer = new Producer({ ...props, "transactional.id": uniqueName("raw-txn"), "transaction.timeout.ms": "10000" });
  const txn = new Transactions(producer);
  let committed = 0;
  let aborted = 0;
  let transactions = 0;
  try {
    await txn.init(30_000);
    // 100 transactions of 100 records (34 on each partition, 32 on the last), every fourth aborted.
    for (let t = 0; t < 100; t++) {
      txn.begin();
      const sends = Array.from({ length: 100 }, (_, i) =>
        txn.produce(n.raw, toJson(withFields({ raw_id: `txn-${t}-${i}` })), { partition: i % 3 }),
      );
      await Promise.all(sends);
      if (t % 4 === 3) {
        await txn.abort(30_000);
        aborted += 100;
      } else {
        await txn.commit(30_000);
        committed += 100;
      }
      transactions++;
    }
  } finally {
    txn.close();
  }
  // Each transaction leaves a marker on each of the three partitions it wrote.
  const markers = transactions * 3;
  const ends = PARTITIONS.map((p) => watermarks(n.raw, p).high);
  expect(ends.reduce((a, b) => a + b, 0)).toBe(committed + aborted + markers);
  const w = await startWorker(workerEnv(n));
  const s = await statsWhen(
    w,
    (s) => s.total_clickhouse === committed && s.offsets_passed_over === aborted + markers && PARTITIONS.every((p, i) => s.partitions[p]?.committed_offset === ends[i]),
    60_000,
    "the committed records stored, the rest passed over, committed to the end",
  );
  // Every marker and aborted record said by librdkafka in its place: no gap, so no skip.
  expect([s.records_expired, s.total_dlq, s.offsets_skipped]).toEqual([0, 0, 0]);
  expect(w.logs.filter((l) => l.includes("deleted by the broker"))).toEqual([]);
  const stored = await storedByPartition(n);
  expect([...stored.values()].reduce((a, r) => a + r.rows, 0)).toBe(committed);
  expect([...stored.values()].every((r) => r.rows === r.offsets)).toBe(true);
  expect(await w.stop()).toBe(0);
}, 120_000);
