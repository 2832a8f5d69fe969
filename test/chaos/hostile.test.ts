// Hostile payloads never crash the worker or stall the partition: each ends in ClickHouse or the
// DLQ, and a valid record after them is inserted.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { unreadable } from "../support/json-readers.ts";
import { consumeN, header, props, text } from "../support/kafka.ts";
import { e2eScope } from "../support/e2e.ts";
import { CLICKHOUSE_SERVERS, waitFor } from "../support/services.ts";
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
  // Every envelope reads in Python's json and Jackson at their defaults: the deep and the long-number
  // payloads travel as strings.
  expect(await unreadable(dlq.map(text))).toEqual([]);
  // The 1 MB record's envelope keeps it whole (the DLQ topic takes 8 MiB messages).
  expect(header(byOffset.get(0)!, HEADERS.truncated)).toBeUndefined();
  expect(JSON.parse(text(byOffset.get(0)!)).original_payload.raw_id.length).toBe(999_000);
  expect(await w.stop()).toBe(0);
}, 60_000);

// Hostile properties combined, as they arrive together: a big integer beside deep nesting once took
// decode down the exact-number path into a stack overflow, and every owner of the partition died on
// the same record with the valid records behind it never stored.
const deep = (n: number, open = "[", close = "]", inner = "") => open.repeat(n) + inner + close.repeat(n);
const U64 = "18446744073709551615";
const validText = (raw: string) => toJson(withFields({ raw_id: raw }));
const COMBINED: Array<[string, string | Uint8Array, string | null]> = [
  ["the 10 KB record: big integer beside 5,000 levels", `{"raw_id":"r","big":${U64},"x":${deep(5_000)}}`, "missing_required_field"],
  ["valid, big up_bytes beside 20,000 levels of arrays", validText("c-big-deep").replace(/"up_bytes":\d+/, `"up_bytes":${U64},"x":${deep(20_000)}`).replace(/"down_bytes":\d+/, '"down_bytes":0'), null],
  ["valid, big integer beside 20,000 levels of objects", validText("c-big-objects").replace("{", `{"big":${U64},"x":${deep(20_000, '{"a":', "}", "0")},`), null],
  ["big integer beside deep nesting, rat invalid", validText("c-bad-rat").replace('"rat":6', `"rat":4,"big":${U64},"x":${deep(5_000)}`), "invalid_rat_value"],
  ["duplicate up_bytes, the last one big, beside nesting", validText("c-dup").replace('"up_bytes":1000', `"up_bytes":1,"x":${deep(5_000)},"up_bytes":${U64}`).replace('"down_bytes":2000', '"down_bytes":0'), null],
  ["__proto__ and an escaped key with a big integer", validText("c-proto").replace("{", `{"__proto__":{"raw_id":1},"\\u0062ig":${U64},`), null],
  ["BOM, lone surrogate and NUL beside a big integer", new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(validText("c-bom").replace('"svc":"voice"', `"svc":"v\\ud800\\u0000","big":${U64}`))]), null],
  ["invalid UTF-8 inside deep nesting with a big integer", new Uint8Array([...new TextEncoder().encode(`{"big":${U64},"x":${"[".repeat(5_000)}"`), 0xc3, 0x28, ...new TextEncoder().encode(`"${"]".repeat(5_000)}}`)]), "malformed_json"],
  ["truncated: big integer then unclosed nesting", `{"raw_id":"t","big":${U64},"x":${"[".repeat(20_000)}`, "malformed_json"],
  ["a 10^4-digit number beside nesting, up_bytes big and negative", validText("c-huge").replace('"up_bytes":1000', `"up_bytes":-${U64},"n":${"9".repeat(10_000)},"x":${deep(5_000)}`), "normalization_error"],
];

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s.url] as const))("combined hostile properties on %s", (_name, url) => {
  const { ch, names } = e2eScope(url);

  test("each combined record is stored or dead-lettered once, every offset is committed, and the 200 valid records behind them land", async () => {
    const n = await names("hostile-combined");
    const p = new Producer(props);
    const sent: Array<string | Uint8Array> = [];
    COMBINED.forEach(([, value], i) => {
      sent.push(value);
      for (let k = 0; k < 20; k++) sent.push(validText(`after-${i}-${k}`));
    });
    for (const value of sent) await p.produce(n.raw, typeof value === "string" ? new TextEncoder().encode(value) : value, { partition: 0 });
    p.close();
    const invalid = COMBINED.filter(([, , reason]) => reason !== null).length;
    const w = await startWorker(workerEnv(n));
    const s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === sent.length, 45_000, "every offset committed");
    expect(s.total_dlq).toBe(invalid);
    const rs = await ch.query({ query: `SELECT raw_id, toString(up_bytes) AS up, count() AS c FROM ${n.database}.${n.table} GROUP BY raw_id, up_bytes`, format: "JSONEachRow" });
    const rows = await rs.json<{ raw_id: string; up: string; c: string }>();
    expect(rows.length).toBe(sent.length - invalid);
    expect(rows.every((r) => Number(r.c) === 1)).toBe(true);
    const up = new Map(rows.map((r) => [r.raw_id, r.up]));
    expect([up.get("c-big-deep"), up.get("c-dup"), up.get("c-big-objects")]).toEqual([U64, U64, "1000"]);
    const dlq = await consumeN(n.dlq, invalid);
    const reasons = new Map(dlq.map((m) => [Number(header(m, HEADERS.sourceOffset)), JSON.parse(text(m)).failure_reason]));
    COMBINED.forEach(([name, , reason], i) => {
      if (reason !== null) expect(`${name}: ${reasons.get(i * 21)}`).toBe(`${name}: ${reason}`);
    });
    expect(await unreadable(dlq.map(text))).toEqual([]);
    // Payloads 5,000 levels deep travel as strings, verbatim, and their envelopes say why.
    const deepOne = dlq.find((m) => Number(header(m, HEADERS.sourceOffset)) === 0)!;
    expect([typeof JSON.parse(text(deepOne)).original_payload, header(deepOne, HEADERS.asText)]).toEqual(["string", "nesting deeper than 500 levels"]);
    expect(await w.stop()).toBe(0);
  }, 60_000);
});
