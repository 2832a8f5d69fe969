// An insert ClickHouse stored whose answer never reached the worker (a reset after the server
// answered, an answer later than CLICKHOUSE_REQUEST_TIMEOUT_MS) is not sent again blindly: the worker
// ends it, reads which rows are stored, and sends only the rest. Counted without FINAL, merges
// stopped, by provenance: no row twice, none lost, none dead-lettered; with two endpoints over one
// server too, where a resend may go to the other one.
import type { ClickHouseClient } from "@clickhouse/client";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedThrough, props } from "../support/kafka.ts";
import { GROUP_PROTOCOLS } from "../support/protocols.ts";
import { CLICKHOUSE_SERVERS } from "../support/services.ts";
import { reportScenario, stallMeter } from "../support/scenario-meter.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const RECORDS = 6_000;

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s.url] as const))("lost insert answers on %s", (_name, url) => {
  const { ch, names } = e2eScope(url);
  const counts = (n: { database: string; table: string }) => countRows(ch, n);

  test("answers lost after the server stored the insert (resets and answers past the timeout): 0 rows twice, 0 lost, 0 dead-lettered", async () => {
    const n = await names("lost-answers");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await produce(n.raw, "lost");
    const proxy = TcpProxy.inFrontOf(url);
    // Every third insert loses its answer, resets and late answers in turn.
    proxy.loseAnswers((k) => (k % 3 === 2 ? (k % 2 === 0 ? "reset" : "late") : null));
    try {
      const w = await startWorker(
        // Batches of 500 and no growth under a backlog: a dozen inserts, so every kind of loss comes round.
        workerEnv({ ...n, clickhouseUrl: proxy.url }, { BATCH_SIZE: "500", BATCH_BACKLOG_ROWS: "500", CLICKHOUSE_REQUEST_TIMEOUT_MS: "1500", CH_RETRY_INITIAL_DELAY_MS: "50" }),
      );
      const s = await statsWhen(w, (s) => committed(s) === RECORDS, 90_000, "every offset committed");
      expect(await w.stop()).toBe(0);
      expect(proxy.lost.reset).toBeGreaterThan(0);
      expect(proxy.lost.late).toBeGreaterThan(0);
      expect(s.clickhouse_answers_lost).toBeGreaterThanOrEqual(proxy.lost.reset + proxy.lost.late);
      expect(s.total_dlq).toBe(0);
      expect(await counts(n)).toEqual([RECORDS, RECORDS]);
    } finally {
      proxy.down();
    }
  }, 120_000);

  test("two endpoints over one server, both losing answers: a resend goes to the other endpoint only after a check, 0 rows twice, 0 lost, 0 dead-lettered", async () => {
    const n = await names("lost-answers-two");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await produce(n.raw, "two");
    const proxies = [TcpProxy.inFrontOf(url), TcpProxy.inFrontOf(url)];
    for (const p of proxies) p.loseAnswers((k) => (k % 3 === 2 ? (k % 2 === 0 ? "reset" : "late") : null));
    try {
      const w = await startWorker(
        workerEnv({ ...n, clickhouseUrl: proxies.map((p) => p.url).join(",") }, { BATCH_SIZE: "500", BATCH_BACKLOG_ROWS: "500", CLICKHOUSE_REQUEST_TIMEOUT_MS: "1500", CH_RETRY_INITIAL_DELAY_MS: "50" }),
      );
      const s = await statsWhen(w, (s) => committed(s) === RECORDS, 90_000, "every offset committed");
      expect(await w.stop()).toBe(0);
      // Both endpoints took inserts and lost answers.
      for (const p of proxies) expect(p.lost.reset + p.lost.late).toBeGreaterThan(0);
      expect(s.clickhouse_answers_lost).toBeGreaterThanOrEqual(proxies.reduce((sum, p) => sum + p.lost.reset + p.lost.late, 0));
      expect(s.total_dlq).toBe(0);
      expect(await counts(n)).toEqual([RECORDS, RECORDS]);
    } finally {
      for (const p of proxies) p.down();
    }
  }, 120_000);
});

// Lost answers while the group moves partitions: a, losing answers, drains a backlog; b joins, losing
// answers too, and is given partitions as the protocol moves them (all at once, incrementally, or by
// the broker's reconciliation). An insert whose answer a lost may have stored rows of a partition b
// now owns: b's replay check must see them. Counted as billing does, on ClickHouse 18.16.
describe.each(GROUP_PROTOCOLS.map((p) => [p.name, p] as const))("lost insert answers while a second worker joins, %s", (_name, protocol) => {
  const url = CLICKHOUSE_SERVERS[0]!.url;
  const { ch, names } = e2eScope(url);

  test("0 rows twice, 0 lost, 0 dead-lettered", async () => {
    const n = await names("lost-join");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await produce(n.raw, "join");
    const proxies = [TcpProxy.inFrontOf(url), TcpProxy.inFrontOf(url)];
    for (const p of proxies) p.loseAnswers((k) => (k % 3 === 2 ? (k % 2 === 0 ? "reset" : "late") : null));
    const env = (i: number) =>
      workerEnv({ ...n, clickhouseUrl: proxies[i]!.url }, {
        ...protocol.env,
        BATCH_SIZE: "250",
        BATCH_BACKLOG_ROWS: "250",
        CLICKHOUSE_REQUEST_TIMEOUT_MS: "1500",
        CH_RETRY_INITIAL_DELAY_MS: "50",
        WORKER_INSTANCE: `join-${i}`,
      });
    const workers: Awaited<ReturnType<typeof startWorker>>[] = [];
    let meter: ReturnType<typeof stallMeter> | null = null;
    try {
      const a = await startWorker(env(0));
      workers.push(a);
      await statsWhen(a, (s) => s.total_clickhouse >= 500, 60_000, "a storing");
      meter = stallMeter(ch, n);
      const b = await startWorker(env(1));
      workers.push(b);
      await statsWhen(b, (s) => s.assigned_partitions.length > 0, 60_000, "b given partitions");
      await committedThrough(n.group, n.raw, 3, RECORDS, 90_000);
      const stats = [await a.stats(), await b.stats()];
      expect([await a.stop(), await b.stop()]).toEqual([0, 0]);
      expect(proxies[0]!.lost.reset + proxies[0]!.lost.late).toBeGreaterThan(0);
      expect(stats.map((s) => s.total_dlq)).toEqual([0, 0]);
      const [rows, offsets] = await countRows(ch, n);
      const stall = await meter.stop(offsets);
      reportScenario({ scenario: "lost answers, a second worker joins", protocol: protocol.id, rows, rows_twice: rows - offsets, envelopes: 0, envelopes_twice: 0, longest_stall_s: stall });
      expect([rows, offsets]).toEqual([RECORDS, RECORDS]);
    } finally {
      await meter?.stop(0);
      for (const p of proxies) p.down();
      for (const w of workers) w.proc.kill("SIGKILL");
    }
  }, 120_000);
});

// A server that ends an insert at its max_execution_time (test/clickhouse/insert-life.test.ts) lets
// a lost answer's check go on without the endpoint it went to: the rows are read on the other one.
const bounding = CLICKHOUSE_SERVERS.find((s) => s.version.test("26.9."))!;
describe(`an endpoint lost with an answer on ${bounding.name}`, () => {
  const { ch, names } = e2eScope(bounding.url);

  test("an endpoint that loses an insert's answer and goes away for good: the other takes the rest once the insert's bound has passed, 0 rows twice, 0 dead-lettered", async () => {
    const n = await names("lost-answers-gone");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await produce(n.raw, "gone");
    const [gone, other] = [TcpProxy.inFrontOf(bounding.url), TcpProxy.inFrontOf(bounding.url)];
    // Its first insert is stored, the answer lost, and the endpoint is then down until the end.
    gone.loseAnswers((k) => (k === 1 ? (setTimeout(() => gone.down(), 0), "late") : null));
    try {
      const w = await startWorker(
        workerEnv({ ...n, clickhouseUrl: `${gone.url},${other.url}` }, { BATCH_SIZE: "500", BATCH_BACKLOG_ROWS: "500", CLICKHOUSE_REQUEST_TIMEOUT_MS: "1500" }),
      );
      const s = await statsWhen(w, (s) => committed(s) === RECORDS, 90_000, "every offset committed");
      expect(await w.stop()).toBe(0);
      expect(gone.lost.late).toBe(1);
      expect(s.clickhouse_answers_lost).toBeGreaterThanOrEqual(1);
      expect(s.total_dlq).toBe(0);
      expect(await counts(n)).toEqual([RECORDS, RECORDS]);
    } finally {
      gone.down();
      other.down();
    }
  }, 120_000);

  async function counts(n: { database: string; table: string }): Promise<[number, number]> {
    return countRows(ch, n);
  }
});

function committed(s: Record<string, any>): number {
  return [0, 1, 2].reduce((sum, q) => sum + (s.partitions[String(q)]?.committed_offset ?? 0), 0);
}

async function produce(topic: string, prefix: string): Promise<void> {
  const p = new Producer(props);
  await p.produceBatch(topic, Array.from({ length: RECORDS }, (_, i) => toJson(withFields({ raw_id: `${prefix}-${i}` }))));
  p.close();
}

/** Rows stored, and distinct provenances among them: billing's count beside the distinct one. */
async function countRows(ch: ClickHouseClient, n: { database: string; table: string }): Promise<[number, number]> {
  const rs = await ch.query({
    query: `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${n.database}.${n.table}`,
    format: "JSONEachRow",
  });
  const [c] = await rs.json<{ rows: string | number; offsets: string | number }>();
  return [Number(c!.rows), Number(c!.offsets)];
}
