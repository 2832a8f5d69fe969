/**
 * One fill of the DLQ table by `dlq fill`, as dlq-fill.ts and dlq-fill-cost.ts measure it: N
 * envelopes as a worker with the filler's key writes them (signed, with the worker's headers; half
 * malformed JSON, half an invalid field) produced into fresh topics, then the filler (a
 * subprocess) started with `env` and read until the table holds every one. Its CPU a envelope over
 * the whole process (start-up included) and from its first row to its last (without it).
 */
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";
import { ProvenanceKey } from "../../src/dlq/provenance-mac.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun, type Harness, type ThreadGroup } from "../lib/harness.ts";

const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

export interface Fill {
  /** From the filler's spawn to its last row (start-up included, as a user meets it). */
  envelopes_per_s: number;
  /** From its first row to its last. */
  sustained_envelopes_per_s: number;
  /** The filler's CPU from its spawn to its last row, an envelope. */
  filler_us_per_envelope: number;
  /** From its first row to its last: the backlog's own cost, without the start. */
  sustained_filler_us_per_envelope: number;
  /** The whole process's CPU an envelope by thread group: where it goes. */
  threads_us_per_envelope: Record<ThreadGroup, number>;
}

const payload = (i: number) =>
  i % 2
    ? `{"raw_id":"bench-${i}","device_id":"dev-${i % 97}","caller_num":"+4915112345678","svc":"data","rat":7,` +
      `"epoch_start":1700000000,"epoch_end":1700000120,"up_bytes":1000,"down_bytes":2000,"lac":1234,"ci":5678}`
    : `{"raw_id":"bench-${i}","device_id":"dev-${i % 89}","caller_num":"+447700900123","svc":"voice", oops`;

/** An envelope as a worker with the filler's key writes it: signed, so the filler checks every MAC. */
export function benchEnvelope(i: number, key: ProvenanceKey): { value: string; headers: Array<[string, string]> } {
  const reason = i % 2 ? "invalid_rat_value" : "malformed_json";
  const value = encodeEnvelope(
    { reason, field: i % 2 ? "rat" : null, payload: payload(i), payloadIsObject: i % 2 === 1 },
    new Date(),
    "bench-w",
  );
  const source = { topic: "cdr.raw", partition: i % 3, offset: i };
  return { value, headers: envelopeHeaders({ ...source, stage: "decode", detail: "bench" }, value, payload(i), key) };
}

export interface FillRun {
  run: Harness;
  key: ProvenanceKey;
  producer: Producer;
  /** Rows in the DLQ table now. */
  rows(): Promise<number>;
}

/**
 * Fills a backlog of N envelopes, then calls `after` with the filler still running (dlq-fill.ts
 * measures the lag of single envelopes there); stops the filler and drops the run's topics and table.
 */
export async function fillOnce(
  N: number,
  env: Record<string, string>,
  binary?: string,
  after?: (r: FillRun) => Promise<void>,
): Promise<Fill> {
  const run = await prepareRun("dlqfill", "bench");
  const base = run.env();
  const key = new ProvenanceKey(base.DLQ_PROVENANCE_KEY!, {
    group: base.KAFKA_GROUP_ID!,
    dlqTopic: run.dlq,
    table: `${run.database}.${run.table}`,
  });
  const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20" });
  try {
    for (let i = 0; i < N; i += 5_000)
      await Promise.all(
        Array.from({ length: Math.min(5_000, N - i) }, (_, k) => {
          const e = benchEnvelope(i + k, key);
          return producer.produce(run.dlq, e.value, { headers: e.headers });
        }),
      );
    const rows = async () =>
      Number(
        (
          await (
            await run.ch.query({ query: `SELECT count() FROM ${run.database}.${run.table}_dlq`, format: "TabSeparated" })
          ).text()
        ).trim(),
      );
    const cmd = binary ? [binary, "dlq", "fill"] : ["bun", MAIN, "dlq", "fill"];
    const spawned = performance.now();
    const filler = Bun.spawn(cmd, { env: run.env(env), stdout: "inherit", stderr: "inherit" });
    try {
      while ((await rows()) === 0) await Bun.sleep(5);
      const t0 = performance.now(), cpu0 = run.cpuSeconds(filler.pid), first = await rows();
      let stored = first;
      while ((stored = await rows()) < N) await Bun.sleep(20);
      const cpu = run.cpuSeconds(filler.pid);
      const threads = run.threadCpuSeconds(filler.pid);
      const ms = performance.now() - t0;
      const filled = stored - first;
      const result = {
        envelopes_per_s: Math.round((N / (performance.now() - spawned)) * 1000),
        sustained_envelopes_per_s: Math.round((filled / ms) * 1000),
        filler_us_per_envelope: +((cpu * 1e6) / N).toFixed(1),
        sustained_filler_us_per_envelope: +((((cpu - cpu0) * 1e6) / filled) || 0).toFixed(1),
        threads_us_per_envelope: Object.fromEntries(
          Object.entries(threads).map(([group, s]) => [group, +((s * 1e6) / N).toFixed(1)]),
        ) as Record<ThreadGroup, number>,
      };
      if (after) await after({ run, key, producer, rows });
      return result;
    } finally {
      filler.kill("SIGTERM");
      await filler.exited;
    }
  } finally {
    producer.close();
    await run.cleanup();
  }
}
