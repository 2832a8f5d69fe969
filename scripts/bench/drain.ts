/**
 * One drain of a backlog by the worker, as delivery-cost.ts and e2e.ts measure it: the records
 * produced into fresh topics, then the worker (a subprocess) started with `env`, read as an operator's
 * scraper would, once a second, until every partition is committed to its end. Records/s from the
 * worker's spawn to its last commit (start-up included, as a user meets it), and from the first
 * scrape that saw a record processed (without it), the worker's CPU µs a record, ClickHouse's CPU
 * µs a row and Kafka's CPU µs a record over the drain (transactions show there).
 */
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun, processCpuSeconds, servicePid } from "../lib/harness.ts";

export interface Drain {
  records_per_s: number;
  /**
   * From the first scrape that saw a record processed to the last commit: the rate once delivering,
   * without the start-up (under exactly-once, the wait for the first heartbeat proven).
   */
  sustained_records_per_s: number;
  worker_us_per_record: number;
  /** The worker's CPU from that first scrape to the last commit, a record processed since. */
  sustained_worker_us_per_record: number;
  clickhouse_us_per_row: number;
  kafka_us_per_record: number;
  /** Commits a second over the drain (under exactly-once, transactions). */
  commits_per_s: number;
}

export async function drainOnce(texts: readonly string[], env: Record<string, string>, binary?: string): Promise<Drain> {
  const N = texts.length;
  const run = await prepareRun("cost", "bench");
  try {
    const p = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20", "batch.num.messages": "10000", "compression.type": "lz4" });
    for (let i = 0; i < N; i += 10_000) await p.produceBatch(run.raw, texts.slice(i, i + 10_000));
    p.close();
    const chPid = servicePid("clickhouse");
    const kafkaPid = servicePid("kafka");
    const spawned = Date.now();
    const ch0 = processCpuSeconds(chPid);
    const kafka0 = processCpuSeconds(kafkaPid);
    const worker = await run.startWorker({ binary, extra: env });
    let last: Record<string, any>;
    let first: { at: number; processed: number; cpu: number } | null = null;
    for (;;) {
      await Bun.sleep(1_000);
      last = await run.stats();
      if (!first && last.total_processed > 0)
        first = { at: Date.now(), processed: last.total_processed, cpu: run.cpuSeconds(worker.pid) };
      if (last.total_processed >= N && (await run.committedToEnd())) break;
    }
    const workerCpu = run.cpuSeconds(worker.pid);
    const chCpu = processCpuSeconds(chPid) - ch0;
    const kafkaCpu = processCpuSeconds(kafkaPid) - kafka0;
    worker.kill("SIGTERM");
    await worker.exited;
    const seconds = (Date.parse(last.last_commit_at) - spawned) / 1000;
    return {
      records_per_s: Math.round(N / seconds),
      sustained_records_per_s: Math.round((N - first!.processed) / Math.max(0.001, (Date.parse(last.last_commit_at) - first!.at) / 1000)),
      worker_us_per_record: +((workerCpu * 1e6) / N).toFixed(1),
      sustained_worker_us_per_record: +((((workerCpu - first!.cpu) * 1e6) / Math.max(1, N - first!.processed))).toFixed(1),
      clickhouse_us_per_row: +((chCpu * 1e6) / Math.max(1, last.total_clickhouse)).toFixed(1),
      kafka_us_per_record: +((kafkaCpu * 1e6) / N).toFixed(1),
      commits_per_s: +(last.commits / seconds).toFixed(1),
    };
  } finally {
    await run.cleanup();
  }
}

