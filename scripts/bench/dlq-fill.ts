/**
 * What filling the DLQ table costs (`dlq fill`): a backlog of N envelopes (with the worker's headers,
 * signed) is filled from a standing start, giving envelopes/s and the filler's CPU per envelope
 * (from its first row to its last: the start is not counted); then, caught up, one envelope every
 * 50 ms for 10 s, giving the lag from the DLQ's acknowledgement of an envelope to its row being
 * readable, at each flush interval asked.
 * Usage: bun scripts/bench/dlq-fill.ts [envelopes=100000] [flush seconds=2,0.2] [binary=bun src/main.ts]
 * (services running; nothing else heavy: it compares CPU)
 */
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";
import { ProvenanceKey } from "../../src/dlq/provenance-mac.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun } from "../lib/harness.ts";

const N = Number(process.argv[2] ?? 100_000);
const FLUSHES = (process.argv[3] ?? "2,0.2").split(",").map(Number);
const binary = process.argv[4];
const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

const payload = (i: number) =>
  i % 2
    ? `{"raw_id":"bench-${i}","device_id":"dev-${i % 97}","caller_num":"+4915112345678","svc":"data","rat":7,` +
      `"epoch_start":1700000000,"epoch_end":1700000120,"up_bytes":1000,"down_bytes":2000,"lac":1234,"ci":5678}`
    : `{"raw_id":"bench-${i}","device_id":"dev-${i % 89}","caller_num":"+447700900123","svc":"voice", oops`;

/** An envelope as a worker with the filler's key writes it: signed, so the filler checks every MAC. */
function envelope(i: number, key: ProvenanceKey): { value: string; headers: Array<[string, string]> } {
  const reason = i % 2 ? "invalid_rat_value" : "malformed_json";
  const value = encodeEnvelope({ reason, field: i % 2 ? "rat" : null, payload: payload(i), payloadIsObject: i % 2 === 1 }, new Date(), "bench-w");
  const source = { topic: "cdr.raw", partition: i % 3, offset: i };
  return { value, headers: envelopeHeaders({ ...source, stage: "decode", detail: "bench" }, value, payload(i), key) };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

for (const flush of FLUSHES) {
  const run = await prepareRun("dlqfill", "bench");
  const env = run.env();
  const key = new ProvenanceKey(env.DLQ_PROVENANCE_KEY!, {
    group: env.KAFKA_GROUP_ID!,
    dlqTopic: run.dlq,
    table: `${run.database}.${run.table}`,
  });
  try {
    const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20" });
    for (let i = 0; i < N; i += 5_000)
      await Promise.all(
        Array.from({ length: Math.min(5_000, N - i) }, (_, k) => {
          const e = envelope(i + k, key);
          return producer.produce(run.dlq, e.value, { headers: e.headers });
        }),
      );
    const rows = async () =>
      Number((await (await run.ch.query({ query: `SELECT count() FROM ${run.database}.${run.table}_dlq`, format: "TabSeparated" })).text()).trim());
    const cmd = binary ? [binary, "dlq", "fill"] : ["bun", MAIN, "dlq", "fill"];
    const filler = Bun.spawn(cmd, { env: run.env({ BATCH_FLUSH_INTERVAL_SECONDS: String(flush) }), stdout: "inherit", stderr: "inherit" });
    try {
      while ((await rows()) === 0) await Bun.sleep(5);
      const t0 = performance.now(), cpu0 = run.cpuSeconds(filler.pid), first = await rows();
      let stored = first;
      while ((stored = await rows()) < N) await Bun.sleep(20);
      const ms = performance.now() - t0, cpu = run.cpuSeconds(filler.pid) - cpu0;
      const filled = stored - first;
      const lags: number[] = [];
      for (let i = 0; i < 200; i++) {
        const e = envelope(N + i, key);
        const report = await producer.produce(run.dlq, e.value, { headers: e.headers });
        const acked = performance.now();
        const q = `SELECT count() FROM ${run.database}.${run.table}_dlq WHERE dlq_offset = ${report.offset}`;
        while (Number((await (await run.ch.query({ query: q, format: "TabSeparated" })).text()).trim()) === 0) await Bun.sleep(5);
        lags.push(performance.now() - acked);
        await Bun.sleep(Math.max(0, 50 - (performance.now() - acked)));
      }
      console.log(
        JSON.stringify({
          flush_interval_s: flush,
          backlog: N,
          envelopes_per_s: Math.round((filled / ms) * 1000),
          cpu_us_per_envelope: Math.round(((cpu * 1e6) / filled) * 10) / 10,
          lag_ms: { p50: Math.round(pct(lags, 50)), p95: Math.round(pct(lags, 95)), max: Math.round(Math.max(...lags)) },
          rows: await rows(),
        }),
      );
    } finally {
      producer.close();
      filler.kill("SIGTERM");
      await filler.exited;
    }
  } finally {
    await run.cleanup();
  }
}
