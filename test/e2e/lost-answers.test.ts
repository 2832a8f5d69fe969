// An insert ClickHouse stored whose answer never reached the worker (a reset after the server
// answered, an answer later than CLICKHOUSE_REQUEST_TIMEOUT_MS) is not sent again blindly: the worker
// ends it, reads which rows are stored, and sends only the rest. Counted without FINAL, merges
// stopped, by provenance: no row twice, none lost, none dead-lettered.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const RECORDS = 6_000;

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s.url] as const))("lost insert answers on %s", (_name, url) => {
  const { ch, names } = e2eScope(url);

  test("answers lost after the server stored the insert (resets and answers past the timeout): 0 rows twice, 0 lost, 0 dead-lettered", async () => {
    const n = await names("lost-answers");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    const p = new Producer(props);
    const values = Array.from({ length: RECORDS }, (_, i) => toJson(withFields({ raw_id: `lost-${i}` })));
    await p.produceBatch(n.raw, values);
    p.close();
    const proxy = TcpProxy.inFrontOf(url);
    // Every third insert loses its answer, resets and late answers in turn.
    proxy.loseAnswers((k) => (k % 3 === 2 ? (k % 2 === 0 ? "reset" : "late") : null));
    try {
      const w = await startWorker(
        // Batches of 500 and no growth under a backlog: a dozen inserts, so every kind of loss comes round.
        workerEnv({ ...n, clickhouseUrl: proxy.url }, { BATCH_SIZE: "500", BATCH_BACKLOG_ROWS: "500", CLICKHOUSE_REQUEST_TIMEOUT_MS: "1500", CH_RETRY_INITIAL_DELAY_MS: "50" }),
      );
      const committed = (s: Record<string, any>) => [0, 1, 2].reduce((sum, q) => sum + (s.partitions[String(q)]?.committed_offset ?? 0), 0);
      const s = await statsWhen(w, (s) => committed(s) === RECORDS, 90_000, "every offset committed");
      expect(await w.stop()).toBe(0);
      expect(proxy.lost.reset).toBeGreaterThan(0);
      expect(proxy.lost.late).toBeGreaterThan(0);
      expect(s.clickhouse_answers_lost).toBeGreaterThanOrEqual(proxy.lost.reset + proxy.lost.late);
      expect(s.total_dlq).toBe(0);
      const rs = await ch.query({
        query: `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${n.database}.${n.table}`,
        format: "JSONEachRow",
      });
      const [counts] = await rs.json<{ rows: string | number; offsets: string | number }>();
      expect([Number(counts!.rows), Number(counts!.offsets)]).toEqual([RECORDS, RECORDS]);
    } finally {
      proxy.down();
    }
  }, 120_000);
});
