/**
 * The worker end to end on this machine, with Kafka and ClickHouse on it too:
 *  0. warm-up: the same pipeline over a smaller backlog first (BENCH_WARMUP records, default N/5),
 *     unmeasured: a freshly started broker's JIT costs it twice the CPU a record;
 *  1. backlog: N synthetic records (realistic mix, 3 % invalid) produced first, then the worker
 *     (a subprocess, as deployed) drains them: sustained records/s, CPU per record of the worker
 *     by thread, of ClickHouse and of Kafka in the same window, their sum, and the rate as a share
 *     of what the machine's cores allow at that sum (cores / sum): on one machine the three share
 *     the cores, so the sum is what bounds the run. Peak RSS, stats latency. Progress is read as an
 *     operator's scraper would, once a second; the end of the drain is the worker's own
 *     last_commit_at, so the coarse polling costs no precision. The whole-run rate counts from the
 *     worker's spawn (its start-up included);
 *  2. information on the same data: kcat draining the topic, and ClickHouse alone ingesting the
 *     same rows in the worker's format (RowBinary) and batch size;
 *  3. the peer: ClickHouse's own Kafka engine on a valid-only copy (kafka-engine-peer.ts), same
 *     partitions and block size; the worker's whole run over the peer's whole run, and over the
 *     peer's run without its final stream_flush_interval_ms wait (18.16 holds a partial block
 *     that long before writing it);
 *  4. latency: a paced stream whose raw_id carries its send time; visibility in ClickHouse
 *     (polled every 50 ms) minus send time, p50 / p99;
 *  5. the same backlog drained again with DELIVERY=at-least-once (drain.ts): exactly-once's cost
 *     beside it, one pair (delivery-cost.ts takes the median of several). BENCH_DELIVERY_PAIR=0
 *     skips it. And the memory bound the worker exports at the setting against the peak RSS.
 * Steps 1–4 run for each setting, in the order a user meets them: first the defaults (BATCH_SIZE,
 * the flush interval and the insert concurrency as the worker ships them), then BATCH_SIZE 10000.
 * One JSON line a setting, then a summary line comparing them. BENCH_BATCH_SIZE=n measures that
 * batch size alone, the rest at the defaults.
 * Usage: [BENCH_BATCH_SIZE=n] [BENCH_PEER=0] bun scripts/bench/e2e.ts [records=1000000] [binary=bun src/main.ts]   (services running)
 */
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun, processCpuSeconds, servicePid, type ThreadGroup } from "../lib/harness.ts";
import { loadConfig } from "../../src/config.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { drainOnce } from "./drain.ts";
import { runKafkaEnginePeer } from "./kafka-engine-peer.ts";

// 10^6 by default: the JIT's start-up compiles are amortized.
const N = Number(process.argv[2] ?? 1_000_000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? Math.floor(N / 5));
/** A setting measured: the worker's environment beyond the harness's, and its batch size. */
interface Setting {
  label: string;
  /** Rows per insert, for the worker and the ClickHouse ceiling alike. */
  batch: number;
  env: Record<string, string>;
}
const DEFAULT_BATCH_SIZE = 1000; // the spec's default, which the worker ships
const SETTINGS: Setting[] = process.env.BENCH_BATCH_SIZE
  ? [{ label: `BATCH_SIZE=${process.env.BENCH_BATCH_SIZE}`, batch: Number(process.env.BENCH_BATCH_SIZE), env: { BATCH_SIZE: process.env.BENCH_BATCH_SIZE } }]
  : [
      { label: "defaults", batch: DEFAULT_BATCH_SIZE, env: {} },
      { label: "BATCH_SIZE=10000", batch: 10_000, env: { BATCH_SIZE: "10000" } },
    ];
const CORES = navigator.hardwareConcurrency;
const producerProps = { "linger.ms": "20", "batch.num.messages": "10000", "compression.type": "lz4" };

// Warm-up: the same pipeline, unmeasured.
if (WARMUP > 0) {
  const warm = await prepareRun("warm", "bench");
  const g = new SyntheticCdrs({ seed: 9, invalidShare: 0.03, idPrefix: `w${warm.table}` });
  const p = new Producer({ "bootstrap.servers": warm.brokers, ...producerProps });
  for (let i = 0; i < WARMUP; i += 10_000) await p.produceBatch(warm.raw, Array.from({ length: Math.min(10_000, WARMUP - i) }, () => g.next().text));
  p.close();
  const w = await warm.startWorker({ binary: process.argv[3], extra: { ...SETTINGS[0]!.env, BATCH_FLUSH_INTERVAL_SECONDS: "0.1" } });
  while ((await warm.stats()).total_processed < WARMUP) await Bun.sleep(500);
  w.kill("SIGTERM");
  await w.exited;
  await warm.cleanup();
}

const results: Array<Record<string, any>> = [];
for (const setting of SETTINGS) results.push(await measure(setting));
// What a user sees first, then the larger batch, side by side.
console.log(JSON.stringify({
  summary: results.map((r) => ({
    setting: r.setting, records_per_s: r.worker_records_per_s, sustained_records_per_s: r.sustained_records_per_s, rows_per_insert: r.inserts.rows_per_insert, inserts_per_s: r.inserts.per_s,
    us_per_record: { worker: r.cpu.worker_us_per_record, worker_main_thread: r.cpu.worker_by_thread_us_per_record.main, clickhouse: r.cpu.clickhouse_us_per_record, kafka: r.cpu.kafka_us_per_record, sum: r.cpu.sum_us_per_record },
    share_of_machine_limit: r.cpu.share_of_machine_limit, peak_rss_mib: r.peak_rss_mib, memory_bound_mib: r.memory.bound_mib, visibility_p99_ms: r.visibility_latency_ms.p99,
    worker_over_peer: r.kafka_engine_peer?.worker_whole_run_over_peer_whole_run ?? null,
    exactly_once_over_at_least_once: r.at_least_once?.exactly_once_over_at_least_once ?? null,
  })),
}));
process.exit(0);

async function measure(setting: Setting): Promise<Record<string, any>> {
  const BATCH = setting.batch;
  const run = await prepareRun("bench", "bench");
  const { brokers, raw, table, ch, stats } = run;

  // Backlog.
  const gen = new SyntheticCdrs({ seed: 1, invalidShare: 0.03, idPrefix: `b${table}` });
  const texts = Array.from({ length: N }, () => gen.next().text);
  const producer = new Producer({ "bootstrap.servers": brokers, ...producerProps });
  for (let i = 0; i < N; i += 10_000) await producer.produceBatch(raw, texts.slice(i, i + 10_000));

  const chPid = servicePid("clickhouse");
  const kafkaPid = servicePid("kafka");
  const spawnedAt = Date.now();
  const worker = await run.startWorker({ binary: process.argv[3], extra: setting.env });
  const rss = () => run.rssMiB(worker.pid);
  let peakRss = 0;
  const statsLatency: number[] = [];
  const cpu0 = { worker: run.threadCpuSeconds(worker.pid), workerTotal: run.cpuSeconds(worker.pid), ch: processCpuSeconds(chPid), kafka: processCpuSeconds(kafkaPid) };
  const t0 = Date.now();
  let last: Record<string, any>;
  const progress: Array<{ at: number; processed: number }> = [];
  for (;;) {
    // RSS is sampled more often than stats (a /proc read costs the worker nothing).
    for (let i = 0; i < 10; i++) {
      peakRss = Math.max(peakRss, rss());
      await Bun.sleep(100);
    }
    const q = performance.now();
    last = await stats();
    statsLatency.push(performance.now() - q);
    progress.push({ at: q, processed: last.total_processed });
    if (last.total_processed >= N) break;
  }
  const cpu1 = { worker: run.threadCpuSeconds(worker.pid), workerTotal: run.cpuSeconds(worker.pid), ch: processCpuSeconds(chPid), kafka: processCpuSeconds(kafkaPid) };
  const drainSeconds = (Date.parse(last.last_commit_at) - t0) / 1000;
  const inserts = (last.clickhouse_endpoints as Array<{ inserts: number }>).reduce((n, e) => n + e.inserts, 0);
  const workerRate = N / drainSeconds;
  // The rate between 10 % and 90 % of the backlog, from the once-a-second samples: the drain without
  // its start-up and without its tail, which waits up to BATCH_FLUSH_INTERVAL_SECONDS for a last,
  // partial batch. That wait is latency, not throughput.
  const from = progress.find((x) => x.processed >= N * 0.1)!;
  const to = progress.find((x) => x.processed >= N * 0.9)!;
  const sustainedRate = to.at > from.at ? ((to.processed - from.processed) * 1000) / (to.at - from.at) : workerRate;
  const wholeRunSeconds = (Date.parse(last.last_commit_at) - spawnedAt) / 1000;
  const perRecord = (s: number) => +((s * 1e6) / N).toFixed(2);
  const byThread = Object.fromEntries((Object.keys(cpu1.worker) as ThreadGroup[]).map((g) => [g, perRecord(cpu1.worker[g] - cpu0.worker[g])]));
  const threadSum = Object.values(cpu1.worker).reduce((a, b) => a + b, 0) - Object.values(cpu0.worker).reduce((a, b) => a + b, 0);
  // Threads that ended during the drain are in the process total only.
  byThread.ended = perRecord(cpu1.workerTotal - cpu0.workerTotal - threadSum);
  const sumSeconds = cpu1.workerTotal - cpu0.workerTotal + (cpu1.ch - cpu0.ch) + (cpu1.kafka - cpu0.kafka);
  const cpu = {
    worker_us_per_record: perRecord(cpu1.workerTotal - cpu0.workerTotal),
    worker_by_thread_us_per_record: byThread,
    clickhouse_us_per_record: perRecord(cpu1.ch - cpu0.ch),
    kafka_us_per_record: perRecord(cpu1.kafka - cpu0.kafka),
    sum_us_per_record: perRecord(sumSeconds),
    cores: CORES,
    // What the cores allow at this sum, and how much of it the run reached.
    machine_limit_records_per_s: Math.round(N / (sumSeconds / CORES)),
    share_of_machine_limit: +(workerRate / (N / (sumSeconds / CORES))).toFixed(2),
  };

  // Latency: a paced stream at ~2k records/s for 10 s.
  const seen = new Map<string, number>();
  const sent = new Map<string, number>();
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const rs = await ch.query({ query: `SELECT raw_id FROM bench.${table} WHERE raw_id LIKE 'lat-%'`, format: "JSONEachRow" });
      const now = Date.now();
      for (const r of await rs.json<{ raw_id: string }>()) if (!seen.has(r.raw_id)) seen.set(r.raw_id, now);
      await Bun.sleep(50);
    }
  })();
  const lat = new SyntheticCdrs({ seed: 2, invalidShare: 0 });
  for (let i = 0; i < 200; i++) {
    const batch = Array.from({ length: 10 }, (_, k) => {
      const rec = JSON.parse(lat.next().text);
      rec.raw_id = `lat-${i}-${k}`;
      sent.set(rec.raw_id, Date.now());
      return JSON.stringify(rec);
    });
    await producer.produceBatch(raw, batch);
    await Bun.sleep(5);
  }
  const waitUntil = Date.now() + 15_000;
  while (seen.size < sent.size && Date.now() < waitUntil) await Bun.sleep(50);
  polling = false;
  await poller;
  const latencies = [...sent].filter(([id]) => seen.has(id)).map(([id, t]) => seen.get(id)! - t).sort((a, b) => a - b);
  worker.kill("SIGTERM");
  const exitCode = await worker.exited;
  producer.close();

  // Ceiling 1: kcat draining the same topic.
  const k0 = performance.now();
  Bun.spawnSync(["kcat", "-b", brokers, "-C", "-t", raw, "-o", "beginning", "-c", String(N), "-e", "-q", "-f", "%s\n"], { stdout: "ignore" });
  const kcatRate = N / ((performance.now() - k0) / 1000);

  // Ceiling 2: ClickHouse alone ingesting the same rows, same format, same batch size, 2 in flight.
  const ctx = { phone: new PhoneNormalizer() };
  const bodies: Array<{ body: Uint8Array; rows: number }> = [];
  let chunk = new RowBinaryBuffer(1 << 22), inChunk = 0, validRows = 0;
  for (const t of texts) {
    const d = decode(t, ctx);
    if (!d.ok) continue;
    chunk.add(d.row, Math.floor(Date.now() / 1000));
    validRows++;
    if (++inChunk === BATCH) (bodies.push({ body: chunk.bytes(), rows: inChunk }), (chunk = new RowBinaryBuffer(1 << 22)), (inChunk = 0));
  }
  if (inChunk > 0) bodies.push({ body: chunk.bytes(), rows: inChunk });
  await ch.command({ query: `CREATE TABLE bench.${table}_ceiling AS bench.${table}` });
  const writer = new ClickHouseWriter(ch, "bench", `${table}_ceiling`);
  const c0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (const b of bodies) {
    inflight.push(writer.insert(b.body, b.rows));
    if (inflight.length >= 2) await inflight.shift();
  }
  await Promise.all(inflight);
  const chRate = validRows / ((performance.now() - c0) / 1000);

  // The peer, on the same rows the worker inserted.
  const validTexts = texts.filter((t) => decode(t, ctx).ok);
  const peer = process.env.BENCH_PEER === "0" ? null : await runKafkaEnginePeer({
    brokers, ch, database: "bench", name: table, texts: validTexts, partitions: 3, blockSize: BATCH, cpuSeconds: () => processCpuSeconds(chPid),
  });

  await ch.command({ query: `DROP TABLE bench.${table}_ceiling` });
  // Exactly-once (the default) beside at-least-once: the same texts drained by the same binary.
  const pair = process.env.BENCH_DELIVERY_PAIR === "0" ? null : await (async () => {
    const once = await drainOnce(texts, { ...setting.env, DELIVERY: "at-least-once" }, process.argv[3]);
    const eo = N / wholeRunSeconds;
    return {
      whole_run_records_per_s: once.records_per_s, worker_us_per_record: once.worker_us_per_record, clickhouse_us_per_row: once.clickhouse_us_per_row,
      exactly_once_over_at_least_once: {
        records_per_s: +(eo / once.records_per_s).toFixed(2),
        worker_us_per_record: +(cpu.worker_us_per_record / once.worker_us_per_record).toFixed(2),
      },
    };
  })();
  const cfg = loadConfig(setting.env);
  const boundMiB = memoryBoundBytes(cfg.batch, cfg.phone.cacheSize) / 2 ** 20;
  const pct = (a: number[], p: number) => (a.length ? Math.round(a[Math.min(a.length - 1, Math.floor(a.length * p))]!) : null);
  statsLatency.sort((a, b) => a - b);
  const r = Math.round;
  const result = {
    setting: setting.label, records: N, batch_size: BATCH, warmup_records: WARMUP, worker_records_per_s: r(workerRate), drain_seconds: +drainSeconds.toFixed(2),
    sustained_records_per_s: r(sustainedRate),
    worker_whole_run_records_per_s: r(N / wholeRunSeconds), whole_run_seconds: +wholeRunSeconds.toFixed(2), worker_exit_code: exitCode, peak_rss_mib: r(peakRss),
    cpu,
    // What ClickHouse got: a batch grows past BATCH_SIZE while every insert is in flight (BATCH_BACKLOG_ROWS).
    inserts: { rows_per_insert: r(last.total_clickhouse / inserts), per_s: r(inserts / drainSeconds) },
    information: { kcat_drain_records_per_s: r(kcatRate), clickhouse_alone_rows_per_s: r(chRate) },
    kafka_engine_peer: peer && {
      rows: peer.rows, whole_run_rows_per_s: r(peer.rowsPerSecond), final_flush_wait_s: +peer.finalWaitSeconds.toFixed(2),
      without_final_wait_rows_per_s: r(peer.rowsPerSecondWithoutFinalWait), clickhouse_cpu_us_per_row: +peer.clickhouseCpuUsPerRow.toFixed(2),
      worker_whole_run_over_peer_whole_run: +(N / wholeRunSeconds / peer.rowsPerSecond).toFixed(2),
      worker_whole_run_over_peer_without_wait: +(N / wholeRunSeconds / peer.rowsPerSecondWithoutFinalWait).toFixed(2),
    },
    visibility_latency_ms: { samples: latencies.length, of: sent.size, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99) },
    at_least_once: pair,
    memory: { bound_mib: r(boundMiB), peak_rss_mib: r(peakRss), peak_over_bound: +(peakRss / boundMiB).toFixed(2) },
    stats_latency_ms: { samples: statsLatency.length, p50: +statsLatency[Math.floor(statsLatency.length * 0.5)]!.toFixed(1), p99: +statsLatency[Math.floor(statsLatency.length * 0.99)]!.toFixed(1) },
  };
  console.log(JSON.stringify(result));
  await run.cleanup();
  return result;
}
