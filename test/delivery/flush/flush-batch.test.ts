// The flush stage with a fake writer and DLQ (a pure unit test of flush-batch.ts; the e2e tests
// run it against the real ClickHouse and Kafka).
import { expect, setDefaultTimeout, test } from "bun:test";
import { Batch } from "../../../src/delivery/batch/batch.ts";
import { decode } from "../../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../../src/cdr/phone.ts";
import { ClickHouseInsertError } from "../../../src/clickhouse/insert-error.ts";
import { AssignmentLostError } from "../../../src/errors.ts";
import { RowBuffer } from "../../../src/clickhouse/row-encoder.ts";
import type { ClickHouseWriter } from "../../../src/clickhouse/writer.ts";
import type { DlqPublisher, SourceRecord } from "../../../src/dlq/publisher.ts";
import { flushBatch } from "../../../src/delivery/flush/flush-batch.ts";
import { Counters } from "../../../src/stats/counters.ts";
import { toJson, withFields } from "../../fixtures/records.ts";

setDefaultTimeout(60_000);

function batchOf(n: number): Batch {
  const b = new Batch(n, new RowBuffer());
  const ctx = { phone: new PhoneNormalizer() };
  for (let i = 0; i < n; i++) {
    const d = decode(toJson(withFields({ raw_id: `r${i}`, svc: i % 2 ? "data" : "voice" })), ctx);
    if (!d.ok) throw new Error("fixture must be valid");
    b.add(d.row, 0, d.payload, i % 3, 100 + i, Date.now() - 50);
  }
  return b;
}

function fakes(refuse: (line: string) => boolean) {
  const stored: string[] = [];
  const refused: Array<{ r: SourceRecord; column: string | null }> = [];
  const writer = {
    async insert(body: Uint8Array) {
      const lines = Buffer.from(body).toString("utf8").trimEnd().split("\n");
      const bad = lines.findIndex(refuse);
      if (bad >= 0) throw new ClickHouseInsertError("Cannot parse", "data", { code: 27, row: bad + 1, column: "raw_id" });
      stored.push(...lines);
    },
  } as unknown as ClickHouseWriter;
  const dlq = {
    storageFailureReason: "normalization_error",
    async publishRefused(r: SourceRecord, _topic: string, column: string | null) { refused.push({ r, column }); },
    async publishStorageFailure() { throw new Error("not expected"); },
  } as unknown as DlqPublisher;
  return { writer, dlq, stored, refused };
}

test("a refused row goes to the DLQ alone; the rest are stored and counted, partitions and breakdowns exact", async () => {
  const batch = batchOf(10);
  const f = fakes((l) => l.includes("\tr7\t"));
  const counters = new Counters();
  await flushBatch(batch, { writer: f.writer, dlq: f.dlq, counters, topic: "cdr.raw", retry: { maxAttempts: 3, initialDelayMs: 0, backoffFactor: 1 }, onWaiting: () => {}, admit: async () => {} });
  expect(f.stored.length).toBe(9);
  expect(f.refused.map((x) => [x.r.offset, x.r.partition, x.column])).toEqual([[107, 1, "raw_id"]]);
  expect([counters.durableClickhouse, counters.durableDlq, counters.chRefusedRows, counters.byDlqReason.normalization_error]).toEqual([9, 1, 1, 1]);
  expect(Object.fromEntries(counters.byService)).toEqual({ voice: 5, data: 4 });
  expect(counters.endToEndSeconds.count).toBe(9);
});

test("a batch whose partitions were lost while it waited to retry sends nothing more, to ClickHouse or the DLQ, and counts nothing", async () => {
  const batch = batchOf(10);
  let inserts = 0;
  const writer = {
    async insert() {
      inserts++;
      throw new ClickHouseInsertError("connect ECONNREFUSED", "transient", { code: null }, { unreachable: true });
    },
  } as unknown as ClickHouseWriter;
  const dlq = {
    storageFailureReason: "ch_insert_failed",
    async publishRefused() { throw new Error("nothing may be dead-lettered"); },
    async publishStorageFailure() { throw new Error("nothing may be dead-lettered"); },
  } as unknown as DlqPublisher;
  const counters = new Counters();
  const epoch = new AbortController();
  const admit = async (signal: AbortSignal) => {
    if (signal.aborted) throw new Error("lost");
  };
  const waiting: boolean[] = [];
  // Waits for ClickHouse (policy "wait", pauses of 60 s), and is abandoned during its first pause.
  const retry = { maxAttempts: 3, initialDelayMs: 60_000, backoffFactor: 1, whenUnreachable: "wait" as const };
  const flushed = flushBatch(batch, { writer, dlq, counters, topic: "cdr.raw", retry, onWaiting: (w) => {
    waiting.push(w);
    if (w) queueMicrotask(() => epoch.abort());
  }, admit }, epoch.signal);
  const started = performance.now();
  await flushed;
  expect(performance.now() - started).toBeLessThan(5_000); // the pause was cut short
  expect(inserts).toBe(1);
  expect(waiting).toEqual([true, false]);
  expect([counters.durableClickhouse, counters.durableDlq, counters.chExhausted]).toEqual([0, 0, 0]);
});

// Regression (the delivery simulation's zombie-dead-letter): a batch whose retries ran out read what
// its lost answer stored, and the group took its partitions while that read was under way; the rows
// went to the DLQ although their next owner may have stored them meanwhile.
test("retries spent and the partitions lost during the last read of what was stored: nothing goes to the DLQ", async () => {
  const batch = batchOf(4);
  const epoch = new AbortController();
  const writer = {
    async insert() {
      throw new ClickHouseInsertError("Timeout error.", "transient", { code: null }, { mayHaveStored: true });
    },
    async endInserts() {},
    async storedRows() {
      epoch.abort(); // the loss is heard while the check's answer is on its way
      return new Set<string>();
    },
  } as unknown as ClickHouseWriter;
  const sent: unknown[] = [];
  const dlq = {
    storageFailureReason: "normalization_error",
    async publishRefused(r: unknown) { sent.push(r); },
    async publishStorageFailure(rs: unknown[]) { sent.push(...rs); },
  } as unknown as DlqPublisher;
  const counters = new Counters();
  const admit = async (signal: AbortSignal) => {
    if (signal.aborted) throw new AssignmentLostError("insert not sent");
  };
  const retry = { maxAttempts: 1, initialDelayMs: 1, backoffFactor: 1 };
  await flushBatch(batch, { writer, dlq, counters, topic: "cdr.raw", retry, onWaiting: () => {}, admit }, epoch.signal);
  expect(sent).toEqual([]);
  expect([counters.durableClickhouse, counters.durableDlq]).toEqual([0, 0]);
});
