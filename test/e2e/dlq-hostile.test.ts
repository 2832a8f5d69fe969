// No record stops the DLQ table (docs/dlq.md "The DLQ as a table"). Raw records whose envelopes
// carry what a JSON row cannot (a lone surrogate in device_id and in raw_id, a 4-byte character at
// the lenient reader's 256th place, a payload the envelope's cap cuts inside a surrogate pair), and
// records written straight to the DLQ topic by anyone who may (not JSON, a forged envelope, a 3 MB
// device_id, 100,000 `[`, a 100,000-character failure_reason, a 30 kB header, header numbers past
// their columns), between valid envelopes; the filler killed with SIGKILL mid-way and started
// again. The table then holds one row per committed DLQ record (count() beside the distinct
// offsets), every worker envelope with its reason and verified, and no forged record verified.
import { expect, setDefaultTimeout, test } from "bun:test";
import type { Subprocess } from "bun";
import { encodeEnvelope, HEADERS, MAX_PAYLOAD_CHARS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedThrough, props } from "../support/kafka.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { startWorker, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, ch } = e2eScope();
const KEY = "dlq-hostile-test-provenance-key-0123456789";

test("hostile raw records and records written to the DLQ topic, the filler killed -9 mid-way: one row each, worker envelopes verified, no forged one", async () => {
  const n = await names("dlqhostile");
  // RECORD_MAX_BYTES raised, as an operator may: a 2 MB record's envelope carries its first 2^20
  // characters, cut where the test puts a surrogate pair.
  const env = workerEnv(n, { DLQ_PROVENANCE_KEY: KEY, RECORD_MAX_BYTES: String(4 << 20), BATCH_FLUSH_INTERVAL_SECONDS: "0.1" });
  const p = new Producer({ ...props, "message.max.bytes": "100000000", "compression.type": "lz4" });
  const raw = [
    ...Array.from({ length: 40 }, (_, i) => toJson(withFields({ raw_id: `ok-${i}` }))),
    `{"raw_id":"s-1","device_id":"\\ud83d","rat":7}`,
    `{"raw_id":"\\udfff-lone","rat":7}`,
    JSON.stringify({ raw_id: `${"r".repeat(255)}😀tail`, rat: 7 }),
    `{"raw_id":"long","rat":7,"pad":"${"x".repeat(MAX_PAYLOAD_CHARS - 33)}😀${"y".repeat(1 << 20)}"}`,
    ...Array.from({ length: 40 }, (_, i) => toJson(withFields({ raw_id: `bad-${i}`, rat: 4 }))),
  ];
  // The cut at the envelope's cap falls between the pair's halves.
  const cutRecord = raw[43]!;
  expect(cutRecord.indexOf("😀")).toBe(MAX_PAYLOAD_CHARS - 1);
  await p.produceBatch(n.raw, raw);
  const w = await startWorker(env);
  await committedThrough(n.group, n.raw, 3, raw.length);
  // What the worker acknowledged: the 4 hostile records and the 40 invalid ones, nothing else.
  const { total_clickhouse, total_dlq } = await w.stats();
  expect([total_clickhouse, total_dlq]).toEqual([40, 44]);
  const workerEnvelopes = total_dlq as number;
  expect(await w.stop()).toBe(0);

  // What anyone with Write on the DLQ topic can put there, between the worker's envelopes.
  const forgedEnvelope = encodeEnvelope({ reason: "malformed_json", field: null, payload: '{"raw_id":"forged"}', payloadIsObject: true }, new Date(), "w-evil");
  const direct: Array<{ value: string; headers?: Array<[string, string]> }> = [
    { value: "not json at all" },
    { value: forgedEnvelope, headers: [[HEADERS.sourceTopic, n.raw], [HEADERS.sourcePartition, "0"], [HEADERS.sourceOffset, "3"], [HEADERS.sourceMac, "0".repeat(64)]] },
    { value: encodeEnvelope({ reason: "invalid_rat_value", field: "rat", payload: JSON.stringify({ device_id: "d".repeat(3_000_000), rat: 7 }), payloadIsObject: true }, new Date(), "w") },
    { value: "[".repeat(100_000) },
    { value: JSON.stringify({ original_payload: "x", failure_reason: "f".repeat(100_000), failed_field: null, failed_at: "2026-12-06T00:00:00.000Z", worker_instance: null }) },
    { value: "[".repeat(200_000) },
    { value: forgedEnvelope, headers: [["x-big", "h".repeat(30_000)]] },
    { value: forgedEnvelope, headers: [[HEADERS.sourceTopic, n.raw], [HEADERS.sourceOffset, "1e21"], [HEADERS.attempts, "99999999999999999999"], [HEADERS.sourcePartition, "3000000000"]] },
  ];
  for (const d of direct) await p.produce(n.dlq, d.value, { partition: 0, headers: d.headers ?? [] });
  p.close();
  const total = workerEnvelopes + direct.length;

  const table = `${n.database}.${n.table}_dlq`;
  const counts = async () => {
    const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${table}`;
    const [c] = await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
    return [Number(c!.rows), Number(c!.offsets)] as const;
  };
  const fill = (): Subprocess => Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "fill"], { env: { ...env, BATCH_SIZE: "7" }, stdout: "ignore", stderr: "ignore" });
  // Killed -9 once some rows are stored and before all are, then started again.
  const first = fill();
  try {
    await waitFor(async () => ((await counts())[0] >= 7 ? true : undefined), 60_000, "the first rows stored");
  } finally {
    first.kill("SIGKILL");
    await first.exited;
  }
  const second = fill();
  try {
    await waitFor(async () => ((await counts())[0] >= total ? true : undefined), 90_000, "every committed DLQ record a row");
  } finally {
    second.kill("SIGTERM");
    await second.exited;
  }
  expect(await counts()).toEqual([total, total]);
  const rows = await (await ch.query({
    query: `SELECT failure_reason, mac_verified, worker_instance, payload_truncated, unreadable FROM ${table} ORDER BY dlq_partition, dlq_offset`,
    format: "JSONEachRow",
  })).json<{ failure_reason: string; mac_verified: number | null; worker_instance: string; payload_truncated: number; unreadable: string }>();
  const verified = rows.filter((r) => r.mac_verified === 1);
  // Every worker envelope with its reason, verified whole: the one whose payload travels cut too
  // (the MAC covers the envelope as written). Nothing else.
  const ours = rows.filter((r) => r.worker_instance.startsWith("e2e-worker"));
  expect(ours.length).toBe(workerEnvelopes);
  expect(ours.filter((r) => r.payload_truncated === 1).map((r) => r.mac_verified)).toEqual([1]);
  expect(verified.length).toBe(workerEnvelopes);
  expect(verified.every((r) => ["invalid_rat_value", "missing_required_field"].includes(r.failure_reason))).toBe(true);
  expect(rows.filter((r) => r.worker_instance === "w-evil").every((r) => r.mac_verified !== 1)).toBe(true);
  // The mended fields say so: the lone surrogates, the cut pair, the numbers past their columns.
  const said = rows.map((r) => r.unreadable).join("\n");
  for (const what of ["device_id: a lone surrogate", "raw_id: a lone surrogate", "original_payload: a lone surrogate", "source_offset: out of the exact integers"])
    expect(said).toContain(what);
}, 300_000);
