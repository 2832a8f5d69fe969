// Hostile payloads never crash the worker or stall the partition: each ends in ClickHouse or the
// DLQ, and a valid record after them is inserted.
import { expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { consumeN, header, props, text } from "../support/kafka.ts";
import { e2eScope } from "../support/e2e.ts";
import { waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

test("1 MB records, deep nesting, 10^5 keys, NUL bytes, invalid UTF-8 and 10^4-digit numbers all end in the DLQ; a valid 1 MB record and the next record land", async () => {
  const n = await names("hostile");
  const enc = new TextEncoder();
  const hostile: Array<[string, string | Uint8Array, string]> = [
    ["1 MB record", toJson(withFields({ raw_id: "r".repeat(999_000), rat: 4 })), "invalid_rat_value"],
    ["max-size non-object", `[${"1,".repeat(499_000)}1]`, "malformed_json"],
    ["deeply nested", "[".repeat(100_000) + "]".repeat(100_000), "malformed_json"],
    ["10^5 keys", "{" + Array.from({ length: 100_000 }, (_, i) => `"${i.toString(36)}":0`).join(",") + "}", "missing_required_field"],
    ["NUL bytes", "\u0000\u0000{\u0000}", "malformed_json"],
    ["invalid UTF-8", new Uint8Array([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d]), "malformed_json"],
    ["10^4-digit number", toJson(withFields({ up_bytes: BigInt("7".repeat(10_000)) })), "normalization_error"],
  ];
  const p = new Producer({ ...props, "message.max.bytes": "1048576" });
  for (const [, value] of hostile) await p.produce(n.raw, typeof value === "string" ? enc.encode(value) : value, { partition: 0 });
  // Texts have no limit of their own: a record near Kafka's 1 MB is valid and stored whole.
  await p.produce(n.raw, toJson(withFields({ raw_id: "big-valid", device_id: "d".repeat(900_000) })), { partition: 0 });
  await p.produce(n.raw, toJson(withFields({ raw_id: "after-hostile" })), { partition: 0 });
  p.close();
  const w = await startWorker(workerEnv(n));
  const s = await statsWhen(w, (s) => s.total_processed === hostile.length + 2 && s.partitions["0"]?.committed_offset === hostile.length + 2, 30_000, "all hostile records handled");
  expect(s.total_dlq).toBe(hostile.length);
  await waitFor(async () => {
    const rs = await ch.query({ query: `SELECT raw_id, length(device_id) AS len FROM ${n.database}.${n.table} ORDER BY raw_id`, format: "JSONEachRow" });
    const rows = await rs.json<{ raw_id: string; len: number }>();
    return rows.length === 2 ? rows : undefined;
  }, 10_000, "the valid records").then((rows) => expect(rows.map((r) => [r.raw_id, Number(r.len)])).toEqual([["after-hostile", 15], ["big-valid", 900_000]]));
  const dlq = await consumeN(n.dlq, hostile.length);
  const byOffset = new Map(dlq.map((m) => [Number(header(m, HEADERS.sourceOffset)), m]));
  hostile.forEach(([name, , reason], offset) => {
    const env = JSON.parse(text(byOffset.get(offset)!));
    expect(`${name}: ${env.failure_reason}`).toBe(`${name}: ${reason}`);
  });
  // The 1 MB record's envelope keeps it whole (the DLQ topic takes 8 MiB messages).
  expect(header(byOffset.get(0)!, HEADERS.truncated)).toBeUndefined();
  expect(JSON.parse(text(byOffset.get(0)!)).original_payload.raw_id.length).toBe(999_000);
  expect(await w.stop()).toBe(0);
}, 60_000);
