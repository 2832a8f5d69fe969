/**
 * What TLS costs: start-up to /readyz 200 and the mean insert latency, plaintext against
 * SASL_SSL (SCRAM-SHA-512) to Kafka with https to ClickHouse, on the local servers and certificates
 * (scripts/tls/make-certs.sh). Each mode: `runs` workers on a 20k-record backlog at BATCH_SIZE 1000.
 * Usage: bun scripts/bench/tls.ts [runs=3]   (services running)
 */
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun } from "../lib/harness.ts";

const RUNS = Number(process.argv[2] ?? 3);
const N = 20_000;
const tls = `${import.meta.dir}/../../.local/tls`;
const modes: Record<string, Record<string, string>> = {
  plaintext: {},
  tls: {
    KAFKA_BROKERS: "127.0.0.1:9096", KAFKA_PROP_SECURITY_PROTOCOL: "SASL_SSL", KAFKA_PROP_SASL_MECHANISM: "SCRAM-SHA-512",
    KAFKA_PROP_SASL_USERNAME: "cdr", KAFKA_PROP_SASL_PASSWORD: "cdr-scram-secret", KAFKA_PROP_SSL_CA_LOCATION: `${tls}/ca.crt`,
    CLICKHOUSE_URL: "https://127.0.0.1:8443", CLICKHOUSE_CA_CERT: `${tls}/ca.crt`,
  },
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const out: Record<string, unknown> = {};
for (const [mode, extra] of Object.entries(modes)) {
  const startup: number[] = [];
  const insertMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const run = await prepareRun("tlsbench", "bench");
    const gen = new SyntheticCdrs({ seed: i, invalidShare: 0, idPrefix: `t${run.table}` });
    const p = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20" });
    await p.produceBatch(run.raw, Array.from({ length: N }, () => gen.next().text));
    p.close();
    const t0 = performance.now();
    const w = await run.startWorker({ extra: { ...extra, BATCH_SIZE: "1000", BATCH_FLUSH_INTERVAL_SECONDS: "0.2" } });
    const port = run.env().STATS_PORT;
    while ((await fetch(`http://127.0.0.1:${port}/readyz`)).status !== 200) await Bun.sleep(10);
    startup.push(performance.now() - t0);
    let s: Record<string, any>;
    do {
      await Bun.sleep(200);
      s = await run.stats();
    } while (s.total_processed < N);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const sum = Number(/^cdr_worker_flush_duration_seconds_sum (\S+)$/m.exec(metrics)![1]);
    const count = Number(/^cdr_worker_flush_duration_seconds_count (\S+)$/m.exec(metrics)![1]);
    insertMs.push((sum / count) * 1000);
    w.kill("SIGTERM");
    await w.exited;
    await run.cleanup();
  }
  out[mode] = { startup_to_ready_ms: startup.map(Math.round), startup_median_ms: Math.round(median(startup)), insert_ms_mean: insertMs.map((x) => +x.toFixed(1)), insert_median_ms: +median(insertMs).toFixed(1) };
}
console.log(JSON.stringify(out));
process.exit(0);
