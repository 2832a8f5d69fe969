// The DLQ row's RowBinary writer, column by column by name, writes the bytes of the reference that
// takes each column's writer from its type in sql/002_dlq.sql: for the worker's envelopes, hostile
// records, NULLs and every mended value. Both servers read every column back in
// test/clickhouse/dlq-table.test.ts.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { envelopeHeaders } from "../../src/dlq/publisher.ts";
import { ProvenanceKey } from "../../src/dlq/provenance-mac.ts";
import { dlqRow, type DlqRow } from "../../src/dlq-table/row.ts";
import { DlqRowBinary } from "../../src/dlq-table/row-binary.ts";
import type { Message } from "../../src/kafka/message.ts";
import { HOSTILE_DLQ } from "../fixtures/hostile-dlq.ts";

setDefaultTimeout(60_000);

const enc = new TextEncoder();
const key = new ProvenanceKey("a-secret-of-32-characters-length", { group: "g", dlqTopic: "d", table: "t.c" });

function bodies(rows: DlqRow[]): [Uint8Array, Uint8Array] {
  const fast = new DlqRowBinary(), reference = new DlqRowBinary();
  for (const r of rows) {
    fast.add(r);
    reference.addByColumns(r);
    // Every byte written landed in the buffer: a write past its end is dropped without a word.
    expect([fast.bytes().length, reference.bytes().length]).toEqual([fast.length, reference.length]);
  }
  return [fast.bytes(), reference.bytes()];
}

test("add writes the reference's bytes, row by row and as a batch", () => {
  const rows: DlqRow[] = HOSTILE_DLQ.map((h) => dlqRow(h.message, { storedAt: 1_700_000_000 }));
  for (let i = 0; i < 200; i++) {
    const payload = i % 2 ? `{"raw_id":"r-${i}","caller_num":"+4915112345678","rat":7}` : `{"raw_id":"r-${i}" oops ${"é".repeat(i)}`;
    const text = encodeEnvelope({ reason: i % 2 ? "invalid_rat_value" : "malformed_json", field: i % 2 ? "rat" : null, payload, payloadIsObject: i % 2 === 1 }, new Date(i * 86_400_000), `w-${i % 3}`);
    const headers = envelopeHeaders({ topic: "cdr.raw", partition: i % 3, offset: i, stage: "decode", detail: "d", attempts: i % 5 ? undefined : i }, text, payload, i % 4 ? key : undefined);
    const m: Message = { topic: "cdr.raw.dlq", partition: 1, offset: i, timestamp: -1, key: null, value: enc.encode(text), headers: headers.map(([k, v]) => [k, enc.encode(v)]) };
    rows.push(dlqRow(m, { storedAt: 1_700_000_000 + i, ...(i % 4 ? { key } : {}) }));
  }
  // Every nullable column both NULL and not, across the rows.
  for (const c of ["failed_field", "attempts", "mac_verified", "raw_id", "cdr_id", "device_id", "caller_prefix"] as const) {
    expect({ c, nulls: rows.some((r) => r[c] === null) }).toEqual({ c, nulls: true });
    expect({ c, values: rows.some((r) => r[c] !== null) }).toEqual({ c, values: true });
  }
  for (const r of rows) {
    const [fast, reference] = bodies([r]);
    expect({ offset: r.dlq_offset, same: Buffer.compare(fast, reference) === 0 }).toEqual({ offset: r.dlq_offset, same: true });
  }
  const [fast, reference] = bodies(rows);
  expect(fast.length).toBeGreaterThan(rows.length * 100);
  expect(Buffer.compare(fast, reference)).toBe(0);
});

test("a row whose text ends at the buffer's end still lands whole: the columns after it find their room", () => {
  const base = dlqRow(HOSTILE_DLQ[0]!.message, { storedAt: 1_700_000_000 });
  // The payload's length moves the short texts after it across a 1 KiB buffer's end, byte by byte.
  for (let n = 0; n < 1_200; n++) {
    const row = { ...base, original_payload: "p".repeat(n), payload_as_text: "", unreadable: "short" };
    for (const write of ["add", "addByColumns"] as const) {
      const w = new DlqRowBinary(1_024);
      w[write](row);
      expect({ n, write, landed: w.bytes().length }).toEqual({ n, write, landed: w.length });
    }
  }
});
