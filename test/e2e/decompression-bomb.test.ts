// Decompression bombs through the real broker: records of 200 MB that lz4 packs under the broker's
// 1 MiB, one on each partition between valid records. The worker stays up within its exported
// memory bound, dead-letters each bomb with a payload that names its batch, and stores every valid
// record once: librdkafka (patched, scripts/librdkafka/patches/) stops decompressing at
// receive.message.max.bytes and reports the batch offset by offset instead of fetching it again.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { loadConfig } from "../../src/config.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { memoryBoundBytes } from "../../src/stats/memory-bound.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { consumeN, props, text } from "../support/kafka.ts";
import { explainedBy, startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts } = e2eScope();
const BOMB_BYTES = 200_000_000;
const VALID_EACH_SIDE = 100;

async function produce(topic: string, values: Array<[number, string]>, extra: Record<string, string> = {}) {
  const p = new Producer({ ...props, "compression.type": "lz4", "linger.ms": "20", ...extra });
  try {
    await Promise.all(values.map(([partition, v]) => p.produce(topic, v, { partition })));
  } finally {
    p.close();
  }
}

test("a 200 MB lz4 record on each partition between valid ones: each dead-lettered naming its batch, every valid record stored once, RSS within the bound", async () => {
  const n = await names("bomb");
  const valid = (side: string) =>
    Array.from({ length: 3 * VALID_EACH_SIDE }, (_, i) => [i % 3, toJson(withFields({ raw_id: `bomb-${side}-${i}` }))] as [number, string]);
  await produce(n.raw, valid("before"));
  // Valid JSON, a valid record's fields and 200 MB of spaces: the broker sees under 1 MiB.
  const record = toJson(withFields({ raw_id: "the-bomb" }));
  const bomb = `${record.slice(0, -1)}${" ".repeat(BOMB_BYTES)}}`;
  for (const partition of [0, 1, 2]) await produce(n.raw, [[partition, bomb]], { "message.max.bytes": "300000000" });
  await produce(n.raw, valid("after"));

  const w = await startWorker(workerEnv(n));
  const bound = memoryBoundBytes(loadConfig({ DLQ_PROVENANCE: "unsigned" }).batch, 50_000);
  let peak = 0;
  const sample = setInterval(() => {
    const kib = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${w.proc.pid}/status`, "utf8"))?.[1] ?? 0);
    peak = Math.max(peak, kib * 1024);
  }, 100);
  try {
    await explainedBy(w, async () => {
      const s = await statsWhen(w, (s) => s.total_processed === 6 * VALID_EACH_SIDE + 3 && s.in_flight_buffer === 0, 60_000, "every record durable");
      expect([s.total_clickhouse, s.total_dlq]).toEqual([6 * VALID_EACH_SIDE, 3]);
      const c = await storedCounts(n);
      expect(c).toEqual({ rows: 6 * VALID_EACH_SIDE, ids: 6 * VALID_EACH_SIDE, offsetRows: 6 * VALID_EACH_SIDE, offsets: 6 * VALID_EACH_SIDE });
      const envelopes = (await consumeN(n.dlq, 3, 30_000)).map((m) => JSON.parse(text(m)));
      for (const e of envelopes) {
        expect(e.failure_reason).toBe("normalization_error");
        expect(e.failed_field).toBeNull();
        expect(e.original_payload).toMatch(/^Decompression \(codec 0x3\) of the record batch at offsets (\d+)-\1 \(\d+ compressed bytes\) failed/);
      }
      expect(w.proc.exitCode).toBeNull();
    });
  } finally {
    clearInterval(sample);
    expect(await w.stop()).toBe(0);
  }
  console.log(`3 lz4 bombs of ${BOMB_BYTES / 1e6} MB: peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, bound ${(bound / 2 ** 20).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(bound);
}, 180_000);
