// Faults the delivery core must survive without losing a record.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { produceSynthetic, steadyStream } from "../support/synthetic.ts";
import { committedCount, committedOffsets, committedThrough, consumeN, header, props, readCommitted, text } from "../support/kafka.ts";
import { CLICKHOUSE_URL, ROOT, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv, withFetchDebug } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, distinctIds, storedCounts } = e2eScope();

describe("ClickHouse down", () => {
  test("retries with the configured backoff, then dead-letters the batch and commits; readyz flips; progress resumes when it is back", async () => {
    const n = await names("chdown");
    const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
    const w = await startWorker(workerEnv(n, {
      CLICKHOUSE_URL: proxy.url, CLICKHOUSE_REQUEST_TIMEOUT_MS: "1000",
      CH_RETRY_MAX_ATTEMPTS: "3", CH_RETRY_INITIAL_DELAY_MS: "200", CH_RETRY_BACKOFF_FACTOR: "2", DLQ_STORAGE_FAILURE_REASON: "ch_insert_failed",
    }));
    try {
      await waitFor(async () => ((await fetch(`${w.statsUrl}/readyz`)).status === 200 ? true : undefined), 20_000, "ready");
      proxy.down();
      const p = new Producer(props);
      for (let i = 0; i < 4; i++) await p.produce(n.raw, toJson(withFields({ raw_id: `down-${i}` })), { partition: 0 });
      const s = await statsWhen(w, (s) => s.total_dlq === 4, 20_000, "batch dead-lettered");
      expect(s.clickhouse_retries).toBeGreaterThanOrEqual(2);
      expect(s.clickhouse_exhausted_batches).toBeGreaterThanOrEqual(1);
      expect(s.by_dlq_reason.ch_insert_failed).toBe(4);
      expect((await fetch(`${w.statsUrl}/readyz`)).status).toBe(503);
      const dlq = await consumeN(n.dlq, 4);
      const env = JSON.parse(text(dlq[0]!));
      expect(env).toMatchObject({ failure_reason: "ch_insert_failed", failed_field: null, original_payload: { raw_id: "down-0" } });
      expect(header(dlq[0]!, HEADERS.attempts)).toBe("3");
      await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === 4, 10_000, "commit after DLQ");
      // The retry log shows the backoff of each batch: 200 ms, then 400 ms (batches may interleave).
      const delays = w.logs.filter((l) => l.includes("retrying")).map((l) => JSON.parse(l).delay_ms as number);
      expect([...new Set(delays)].sort((a, b) => a - b)).toEqual([200, 400]);
      expect(delays.filter((d) => d === 200).length).toBe(delays.filter((d) => d === 400).length);
      proxy.up();
      await p.produce(n.raw, toJson(withFields({ raw_id: "back-1" })), { partition: 0 });
      p.close();
      await waitFor(async () => ((await distinctIds(n)) === 1 ? true : undefined), 20_000, "insert after recovery");
      await waitFor(async () => ((await fetch(`${w.statsUrl}/readyz`)).status === 200 ? true : undefined), 20_000, "ready again");
      expect(await w.stop()).toBe(0);
    } finally {
      proxy.down();
      w.proc.kill("SIGKILL");
    }
  }, 60_000);
  test("CH_UNREACHABLE_POLICY=wait: ClickHouse gone for 20 s under load: consumption pauses, readyz 503, no envelope, every row stored", async () => {
    const n = await names("chwait");
    const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
    // Where a pause and resume once handed out 430 records twice: librdkafka's fetch debug in the log file.
    const w = await startWorker(withFetchDebug(workerEnv(n, {
      CLICKHOUSE_URL: proxy.url, CLICKHOUSE_REQUEST_TIMEOUT_MS: "1000", CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0", CH_UNREACHABLE_POLICY: "wait",
      CH_RETRY_MAX_ATTEMPTS: "3", CH_RETRY_INITIAL_DELAY_MS: "200", BATCH_SIZE: "1000",
    })));
    const stream = steadyStream(n.raw, { perRound: 2000, pauseMs: 250, seed: 500, rounds: 200 });
    try {
      await statsWhen(w, (s) => s.total_clickhouse >= 2000, 30_000, "rows flowing");
      proxy.down();
      await waitFor(async () => ((await fetch(`${w.statsUrl}/readyz`)).status === 503 ? true : undefined), 10_000, "not ready");
      await waitFor(() => (w.logs.some((l) => l.includes("consumption paused until one does")) ? true : undefined), 10_000, "paused");
      const pausedAt = (await w.stats()).total_consumed as number;
      await Bun.sleep(20_000);
      const during = await w.stats();
      // Paused: at most what was already fetched before the pause came through; nothing dead-lettered.
      expect(during.total_consumed - pausedAt).toBeLessThan(20_000);
      expect(during.total_dlq).toBe(0);
      expect(during.clickhouse_exhausted_batches).toBe(0);
      proxy.up();
      await stream.stop();
      const valid = stream.sent();
      await waitFor(async () => ((await distinctIds(n)) === valid ? true : undefined), 60_000, "every row stored after the outage");
      await statsWhen(w, (s) => s.total_processed === valid, 30_000, "everything durable");
      // As billing counts: a record handed out twice by the consumer would show here.
      const c = await storedCounts(n);
      expect([c.rows, c.offsetRows, c.offsets]).toEqual([valid, valid, valid]);
      expect(w.logs.some((l) => l.includes("consumption resumed"))).toBe(true);
      expect((await committedCount(n.dlq))).toBe(0);
      expect((await fetch(`${w.statsUrl}/readyz`)).status).toBe(200);
      expect(await w.stop()).toBe(0);
    } finally {
      proxy.down();
      w.proc.kill("SIGKILL");
      await stream.stop();
    }
  }, 150_000);
});

describe("crash safety", () => {
  test("kill -9 at a random moment of a 100k-record run, then a restart: every valid record in ClickHouse, every invalid one in the DLQ", async () => {
    const n = await names("crash");
    const { valid, invalid } = await produceSynthetic(n.raw, 100_000, 0.03, 11);
    const env = workerEnv(n, { BATCH_SIZE: "1000" });
    const first = await startWorker(env);
    // A random moment while the run is under way.
    const target = 20_000 + Math.floor(Math.random() * 60_000);
    await statsWhen(first, (s) => s.total_consumed >= target, 60_000, "progress before the kill");
    first.proc.kill("SIGKILL");
    await first.proc.exited;
    const second = await startWorker(env);
    await waitFor(async () => ((await distinctIds(n)) === valid ? true : undefined), 120_000, "all valid rows");
    // Caught up as the group's commits say: the second worker's stats leave out partitions it read nothing of.
    await committedThrough(n.group, n.raw, 3, 100_000, 120_000);
    expect(await second.stop()).toBe(0);
    // Every valid record stored once: count() beside the distinct ids, and the offsets table's rows.
    const c = await storedCounts(n);
    expect([c.rows, c.ids, c.offsetRows, c.offsets]).toEqual([valid, valid, valid, valid]);
    // Every invalid record in the DLQ once: as many envelopes as distinct sources, as invalid records.
    const dlq = await readCommitted(n.dlq);
    const sources = new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`));
    expect([dlq.length, sources.size]).toEqual([invalid, invalid]);
    const committed = committedOffsets(n.group, n.raw, 3);
    // A partition the producer never wrote to has no committed offset (-1001): count it as 0.
    expect([...committed.values()].reduce((a, b) => a + (b > 0n ? b : 0n), 0n)).toBe(100_000n);
  }, 300_000);
});

describe("bounded memory and the breaker", () => {
  // LARGE_RECORDS=3000 for the full run (2.7 GB through Kafka and ClickHouse; ≈2 min).
  const COUNT = Number(process.env.LARGE_RECORDS ?? 600);
  test(`${COUNT} valid records of 900 kB at the defaults: batches seal by bytes, every record stored, none dead-lettered, peak RSS within the documented bound`, async () => {
    const n = await names("large");
    const p = new Producer({ ...props, "linger.ms": "20" });
    // Random text: a repeated character would compress 250-fold on the LZ4 topic, and one fetch of
    // librdkafka's would then expand to hundreds of megabytes, which no setting of the worker bounds.
    const noise = Buffer.from(crypto.getRandomValues(new Uint8Array(675_000))).toString("base64");
    for (let i = 0; i < COUNT; i++) await p.produce(n.raw, toJson(withFields({ raw_id: `large-${i}`, device_id: `${i}-${noise}` })), { partition: i % 3 });
    p.close();
    const w = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "2" }));
    let peak = 0;
    const s = await statsWhen(w, (s) => {
      peak = Math.max(peak, Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${w.proc.pid}/status`, "utf8"))?.[1] ?? 0) * 1024);
      return s.total_processed === COUNT && s.in_flight_buffer === 0;
    }, 120_000, "every large record durable");
    expect(await w.stop()).toBe(0);
    expect(s.total_dlq).toBe(0);
    expect((await committedCount(n.dlq))).toBe(0);
    const c = await storedCounts(n);
    expect([c.rows, c.ids, c.offsetRows]).toEqual([COUNT, COUNT, COUNT]);
    // 16 MiB batches: about 18 rows each, never the 1000 of BATCH_SIZE.
    expect(s.flush_count).toBeGreaterThanOrEqual(COUNT / 20);
    // docs/internals.md "Memory, in bytes": 120 MiB + (FLUSH_CONCURRENCY + 1) × 2 × BATCH_MAX_BYTES + 2 × 32 MiB of DLQ sends.
    expect(peak / 2 ** 20).toBeLessThan(120 + 3 * 2 * 16 + 64);
    console.log(`${COUNT} records of 900 kB: ${s.flush_count} inserts, peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB`);
  }, 120_000 + COUNT * 100);

  test("a flood larger than the buffer keeps RSS bounded", async () => {
    const n = await names("flood");
    await produceSynthetic(n.raw, 150_000, 0, 21);
    const w = await startWorker(workerEnv(n, { BATCH_SIZE: "2000", FLUSH_CONCURRENCY: "2" }));
    let peak = 0;
    let maxBuffered = 0;
    await statsWhen(w, (s) => {
      const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${w.proc.pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
      peak = Math.max(peak, rss);
      maxBuffered = Math.max(maxBuffered, s.buffered_rows);
      return s.total_processed === 150_000;
    }, 120_000, "flood processed");
    // Three slots of at most BATCH_BACKLOG_ROWS each: 10 × 2000 held to the memory bound's 8192 rows.
    expect(maxBuffered).toBeLessThanOrEqual(3 * 8192);
    const bound = Number(/cdr_worker_memory_bound_bytes (\d+)/.exec(await (await fetch(`${w.statsUrl}/metrics`)).text())![1]);
    expect(peak).toBeLessThan(bound);
    expect(peak / 2 ** 20).toBeLessThan(230);
    expect(await w.stop()).toBe(0);
  }, 150_000);

  test("the DLQ circuit breaker trips on a stream of 90 % invalid records: consumption pauses, what was consumed is still flushed and committed, readyz says why", async () => {
    const n = await names("breaker");
    await produceSynthetic(n.raw, 3000, 0.9, 31);
    // A 3 s flush interval: valid rows are still buffered when the breaker trips.
    const w = await startWorker(workerEnv(n, { DLQ_MAX_RATIO: "0.5", DLQ_RATIO_WINDOW: "200", BATCH_FLUSH_INTERVAL_SECONDS: "3", BATCH_SIZE: "5000" }));
    const tripped = await statsWhen(w, (s) => s.state === "tripped", 20_000, "breaker");
    expect(tripped.total_consumed).toBeLessThan(3000);
    // Everything consumed before the trip becomes durable and committed; nothing more is consumed.
    const s = await statsWhen(w, (s) => s.in_flight_buffer === 0 && s.buffered_rows === 0 && s.total_processed === s.total_consumed
      && Object.values(s.partitions).every((p: any) => (p.committed_offset ?? 0) === p.consumed), 20_000, "consumed records durable and committed");
    expect(s.total_clickhouse).toBeGreaterThan(0);
    expect(s.total_consumed).toBe(tripped.total_consumed);
    expect(s.state).toBe("tripped");
    const ready = await fetch(`${w.statsUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect((await ready.json() as { reasons: string[] }).reasons).toContain("DLQ circuit breaker tripped");
    // The operator's word, as the runbook gives it: the window starts anew, consumption resumes, and
    // the same flood trips it again.
    const probe = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "probe", "--post", `${w.statsUrl}/internal/breaker/reset`], { stdout: "pipe", stderr: "pipe" });
    const [code, said] = await Promise.all([probe.exited, new Response(probe.stdout).text()]);
    expect([code, said.trim()]).toEqual([0, '200 {"reset":true}']);
    const again = await statsWhen(w, (x) => x.total_consumed > s.total_consumed && x.state === "tripped", 20_000, "resumed, then tripped again");
    expect(again.total_consumed).toBeLessThan(3000);
    expect(await w.stop()).toBe(0);
    // Stored once each, those of before the reset among them (count() beside distinct).
    const c = await storedCounts(n);
    expect(c.rows).toBe(c.ids);
    expect(c.rows).toBeGreaterThanOrEqual(s.total_clickhouse);
  }, 60_000);
});
