// `dlq inspect` and `dlq replay` over a DLQ of 10^6 envelopes: they stream in bounded memory, a
// replay selects storage failures apart from bad records by the provenance headers, and an offset
// range resumes where an earlier run stopped.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { encodeEnvelope, HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, props, topicLength } from "../support/kafka.ts";
import { ROOT } from "../support/services.ts";
import { workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names } = e2eScope();
const TOTAL = 1_000_000;
/** Every 10th envelope is a storage failure (with the headers the worker writes); the rest bad records. */
const STORAGE_EVERY = 10;

/** Runs the CLI; returns its JSON output, seconds taken and peak RSS in MiB (read from /proc). */
async function cli(env: Record<string, string>, ...args: string[]) {
  const started = performance.now();
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env, stdout: "pipe", stderr: "pipe" });
  let peak = 0;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, "utf8"))?.[1] ?? 0) / 1024);
    } catch {}
  }, 100);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearInterval(sampler);
  if (code !== 0) throw new Error(`dlq ${args.join(" ")} exited ${code}: ${err}`);
  return { out: JSON.parse(out), seconds: (performance.now() - started) / 1000, peakMiB: peak };
}

test(`a DLQ of ${TOTAL} envelopes: inspect and replay stream in bounded memory, select by stage, resume by offset`, async () => {
  const n = await names("dlqscale");
  const env = workerEnv(n);
  const at = new Date("2026-11-30T00:00:00Z");
  const p = new Producer({ ...props, "linger.ms": "50", "batch.num.messages": "10000" });
  try {
    for (let base = 0; base < TOTAL; base += 10_000) {
      const sends: Promise<unknown>[] = [];
      const bad: string[] = [];
      for (let i = base; i < base + 10_000; i++) {
        if (i % STORAGE_EVERY === 0) {
          const payload = toJson(withFields({ raw_id: `s-${i}` }));
          const value = encodeEnvelope({ reason: "normalization_error", field: null, payload, payloadIsObject: true }, at, "w");
          sends.push(p.produce(n.dlq, value, { headers: [[HEADERS.stage, "clickhouse-failed"], [HEADERS.attempts, "3"]] }));
        } else {
          bad.push(encodeEnvelope({ reason: "malformed_json", field: null, payload: `{broken ${i}`, payloadIsObject: false }, at, "w"));
        }
      }
      // Bad records as one batch: no headers, the stage the reader assumes for them ("decode").
      await Promise.all([...sends, p.produceBatch(n.dlq, bad)]);
    }
  } finally {
    p.close();
  }
  expect((await committedCount(n.dlq))).toBe(TOTAL);

  const inspect = await cli(env, "dlq", "inspect", "--samples", "2");
  expect(inspect.out).toMatchObject({
    total: TOTAL,
    unreadable: 0,
    by_reason: { malformed_json: TOTAL - TOTAL / STORAGE_EVERY, normalization_error: TOTAL / STORAGE_EVERY },
    by_stage: { decode: TOTAL - TOTAL / STORAGE_EVERY, "clickhouse-failed": TOTAL / STORAGE_EVERY },
    next_offsets: { "0": TOTAL },
  });
  // Bounded: nothing is kept per envelope (10^6 envelopes would be hundreds of MiB).
  expect(inspect.peakMiB).toBeLessThan(250);

  // Storage failures only, in two runs: the second resumes where the first's range ended.
  const half = TOTAL / 2;
  const first = await cli(env, "dlq", "replay", "--unverified", "--stage", "clickhouse-failed", "--to-offset", String(half));
  expect(first.out).toMatchObject({ sent: half / STORAGE_EVERY, next_offsets: { "0": half } });
  const rest = await cli(env, "dlq", "replay", "--stage", "clickhouse-failed", "--from-offset", String(first.out.next_offsets["0"]), "--dry-run");
  expect(rest.out.would_send).toBe(half / STORAGE_EVERY);
  expect(rest.out.records).toHaveLength(1000);
  expect(rest.out.records[0]).toMatchObject({ dlq_offset: half, stage: "clickhouse-failed" });
  expect(rest.peakMiB).toBeLessThan(250);
  expect(topicLength(n.raw, 0) + topicLength(n.raw, 1) + topicLength(n.raw, 2)).toBe(half / STORAGE_EVERY);
  console.log(`dlq inspect of ${TOTAL}: ${inspect.seconds.toFixed(1)} s, peak RSS ${inspect.peakMiB.toFixed(0)} MiB; ` +
    `replay of ${half / STORAGE_EVERY} storage failures among ${half}: ${first.seconds.toFixed(1)} s, peak RSS ${first.peakMiB.toFixed(0)} MiB`);
}, 300_000);
