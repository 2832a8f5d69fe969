import { expect, setDefaultTimeout, test } from "bun:test";
import { Batcher } from "../../../src/delivery/batch/batcher.ts";
import { DlqBreaker } from "../../../src/delivery/breaker.ts";
import type { CdrRow } from "../../../src/cdr/decode.ts";
import { RowBuffer } from "../../../src/clickhouse/row-encoder.ts";

setDefaultTimeout(60_000);

const ROW: CdrRow = {
  cdr_id: "9342d47a-1bab-5709-9869-c840b2eac501", raw_id: "r", device_id: "d", msisdn: "+4915112345678", service_type: "voice",
  radio_access_type: "LTE_4G", rat: 6, lac: 1, ci: 2, session_start_time: 1, session_end_time: 2, duration_seconds: 1,
  up_bytes: 1, down_bytes: 2, total_bytes: 3, source_ip: 0,
};

const rowBuffer = () => new RowBuffer();
const add = (b: Batcher, n: number) => {
  for (let i = 0; i < n; i++) b.current.add({ ...ROW, raw_id: `r${i}` }, 0, "{}", 0, i);
};

test("Batch flushed on count threshold: a full batch is due at once", () => {
  const b = new Batcher(3, 1, rowBuffer, { now: 0 });
  add(b, 2);
  expect(b.due(60_000, 1)).toBe(false);
  add(b, 1);
  expect(b.due(60_000, 1)).toBe(true);
});

test("Batch flushed on time interval threshold: due after the interval when non-empty, never when empty", () => {
  const b = new Batcher(1000, 1, rowBuffer, { now: 0 });
  expect(b.due(2000, 5000)).toBe(false);
  add(b, 1);
  expect(b.due(2000, 1999)).toBe(false);
  expect(b.due(2000, 2000)).toBe(true);
});

test("backpressure: with every slot in flight and the filling batch full, room is 0", () => {
  const b = new Batcher(2, 1, rowBuffer, { now: 0 });
  add(b, 2);
  const sealed = b.seal(0);
  expect(sealed.count).toBe(2);
  expect(b.room).toBe(2);
  add(b, 2);
  expect(b.room).toBe(0);
  expect(b.bufferedRows).toBe(4);
  expect(b.due(0, 10)).toBe(false); // cannot seal without a free slot
  b.release(sealed);
  expect(b.room).toBe(2);
  expect(b.bufferedRows).toBe(2);
});

test("a backlog: with every slot in flight the filling batch grows past BATCH_SIZE to backlogRows, then is sealed whole", () => {
  const b = new Batcher(2, 1, rowBuffer, { now: 0, backlogRows: 6 });
  add(b, 2);
  expect(b.sealable).toBe(true);
  const inFlight = b.seal(0);
  add(b, 2);
  expect(b.sealable).toBe(false); // at BATCH_SIZE, but no slot
  expect(b.room).toBe(4); // it goes on filling instead of stopping the poll
  add(b, 4);
  expect([b.current.count, b.current.full, b.room]).toEqual([6, true, 0]);
  b.release(inFlight);
  expect(b.due(60_000, 1)).toBe(true);
  expect(b.seal(1).count).toBe(6); // one insert of what piled up
  expect(b.room).toBe(6); // that one in flight, the next batch empty: it may grow again
  expect(b.current.count).toBe(0);
});

test("no backlog: a batch at BATCH_SIZE with a free slot is sealed at BATCH_SIZE, whatever backlogRows allows", () => {
  const b = new Batcher(2, 2, rowBuffer, { now: 0, backlogRows: 6 });
  add(b, 2);
  expect([b.sealable, b.due(60_000, 0), b.room]).toEqual([true, true, 2]);
  expect(b.seal(0).count).toBe(2);
});

test("a released slot is reused clean", () => {
  const b = new Batcher(2, 1, rowBuffer, { now: 0 });
  add(b, 2);
  const s = b.seal(0);
  b.release(s);
  expect(s.count).toBe(0);
  expect(s.services[0]).toBeUndefined();
  expect(s.payloads[0]).toBeUndefined();
  expect(s.body.length).toBe(0);
});

test("any run of rows can be sent alone: rows(lo, hi) is exactly their lines", () => {
  const b = new Batcher(10, 1, rowBuffer, { now: 0 });
  for (let i = 0; i < 5; i++) b.current.add({ ...ROW, raw_id: `r${i}` }, 0, "{}", 0, i);
  const text = (lo: number, hi: number) => Buffer.from(b.current.rows(lo, hi)).toString("utf8");
  const lines = text(0, 5).split("\n").slice(0, 5).map((l) => l + "\n");
  expect(lines.length).toBe(5);
  expect(text(0, 1)).toBe(lines[0]!);
  expect(text(2, 4)).toBe(lines[2]! + lines[3]!);
  expect(text(4, 5)).toBe(lines[4]!);
});

test("the DLQ breaker trips on 90 % invalid and not on 3 %", () => {
  const trips = (share: number) => {
    const br = new DlqBreaker(0.5, 1000);
    for (let i = 0; i < 5000; i++) if (br.record(i % 100 < share * 100)) return true;
    return false;
  };
  expect(trips(0.9)).toBe(true);
  expect(trips(0.03)).toBe(false);
  const off = new DlqBreaker(1, 1000);
  for (let i = 0; i < 5000; i++) off.record(true);
  expect(off.tripped).toBe(false);
});

test("a batch seals at BATCH_MAX_BYTES as well as at BATCH_SIZE; room and bytesRoom say what a poll may take", () => {
  const b = new Batcher(1000, 1, rowBuffer, { maxBytes: 10_000, now: 0 });
  const big = "x".repeat(3500);
  b.current.add(ROW, 0, big, 0, 0);
  b.current.add(ROW, 0, big, 0, 1);
  expect(b.current.full).toBe(false);
  expect(b.bytesRoom).toBe(10_000 - b.current.bytes);
  b.current.add(ROW, 0, big, 0, 2);
  expect(b.current.full).toBe(true); // 3 payloads and their rows: over 10 000 bytes at 3 of 1000 rows
  expect(b.due(60_000, 1)).toBe(true);
  expect([b.room, b.bytesRoom]).toEqual([1000, 10_000]); // a free slot: the next batch takes it all
  b.seal(1);
  b.current.add(ROW, 0, big, 0, 3);
  b.current.add(ROW, 0, big, 0, 4);
  b.current.add(ROW, 0, big, 0, 5);
  expect(b.canSeal).toBe(false);
  expect([b.room, b.bytesRoom]).toEqual([0, 0]); // full and no free slot: poll nothing
});

test("the row buffer gives back what a batch of large records took once batches are small again", () => {
  const r = new RowBuffer();
  r.add({ ...ROW, device_id: "d".repeat(4 << 20) }, 0);
  const peak = r.buf.length;
  expect(peak).toBeGreaterThan(4 << 20);
  r.reset();
  r.add(ROW, 0);
  r.reset();
  expect(r.buf.length).toBeLessThan(1 << 20);
});
