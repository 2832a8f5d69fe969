/**
 * `audit` at production rates: a backlog of N synthetic records (3 % invalid) drained by the worker,
 * then `audit --resume` as the hourly CronJob runs it, twice: the first run reads the whole backlog
 * (a first run, or `audit` without --resume every time), the second reads only the N/10 records
 * produced and drained after it. Records/s of each run from its spawn to its exit, its CPU µs a
 * record (the audit process; ClickHouse's and Kafka's beside it), the rate of the partitions'
 * reconciliation alone, and the hour at 200,000 records a second extrapolated from the first run's
 * whole rate (start-up and DLQ read included): what one hourly run reads, and how long it takes.
 * Usage: bun scripts/bench/audit.ts [records=1000000] [rounds=2]   (services running)
 */
import { Producer } from "../../src/kafka/producer.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { prepareRun, processCpuSeconds, servicePid, type Harness } from "../lib/harness.ts";

const N = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 2);
const HOURLY = 200_000 * 3600;
const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

async function produce(run: Harness, count: number, seed: number): Promise<void> {
  const gen = new SyntheticCdrs({ seed, invalidShare: 0.03, idPrefix: `audit-${seed}` });
  const p = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20", "batch.num.messages": "10000", "compression.type": "lz4" });
  for (let i = 0; i < count; i += 10_000) await p.produceBatch(run.raw, Array.from({ length: Math.min(10_000, count - i) }, () => gen.next().text));
  p.close();
}

async function drain(run: Harness, total: number): Promise<void> {
  const worker = await run.startWorker();
  for (;;) {
    await Bun.sleep(500);
    if ((await run.stats()).total_processed >= total && (await run.committedToEnd())) break;
  }
  worker.kill("SIGTERM");
  await worker.exited;
}

async function auditRun(run: Harness) {
  const [chPid, kafkaPid] = [servicePid("clickhouse"), servicePid("kafka")];
  const [ch0, kafka0] = [processCpuSeconds(chPid), processCpuSeconds(kafkaPid)];
  const t0 = performance.now();
  // BENCH_BUN_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the audit itself.
  const flags = (process.env.BENCH_BUN_FLAGS ?? "").split(" ").filter(Boolean);
  const proc = Bun.spawn(["bun", ...flags, MAIN, "audit", "--resume"], { env: { ...run.env(), LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "inherit" });
  const out = await new Response(proc.stdout).text();
  const code = await proc.exited;
  const usage = proc.resourceUsage();
  const cpu = usage ? Number(usage.cpuTime.total) / 1e6 : NaN;
  const seconds = (performance.now() - t0) / 1000;
  const lines = out.trim().split("\n").map((l) => JSON.parse(l));
  const summary = lines.at(-1);
  if (code !== 0 || summary.audit !== "clean") throw new Error(`audit exited ${code}: ${JSON.stringify(summary)}`);
  const records = lines.slice(0, -1).reduce((n, l) => n + (l.records ?? 0), 0);
  const per = (s: number) => +((s * 1e6) / Math.max(1, records)).toFixed(2);
  return {
    records,
    seconds: +seconds.toFixed(2),
    dlq_read_seconds: summary.dlq_read_seconds,
    partition_seconds: lines.slice(0, -1).map((l) => l.seconds),
    records_per_s: Math.round(records / seconds),
    // The partitions' reconciliation alone, without the start, the DLQ read and the summary's queries.
    reconcile_records_per_s: Math.round(records / lines.slice(0, -1).reduce((t, l) => t + l.seconds, 0)),
    audit_us: per(cpu),
    clickhouse_us: per(processCpuSeconds(chPid) - ch0),
    kafka_us: per(processCpuSeconds(kafkaPid) - kafka0),
  };
}

for (let round = 1; round <= ROUNDS; round++) {
  const run = await prepareRun("audit", "bench");
  try {
    await produce(run, N, round);
    await drain(run, N);
    const whole = await auditRun(run);
    await produce(run, N / 10, 1000 + round);
    await drain(run, N / 10);
    const next = await auditRun(run);
    console.log(JSON.stringify({
      round,
      first_run: whole,
      resumed_run: next,
      hour_at_200k_per_s: { records: HOURLY, minutes: +(HOURLY / whole.records_per_s / 60).toFixed(1) },
    }));
  } finally {
    await run.cleanup();
  }
}
