/**
 * What each insert format costs ClickHouse, the server alone: the same decoded synthetic rows sent
 * as TabSeparated (the reference encoder), RowBinary (the worker's) and Native (columnar, encoded
 * here for the comparison), BATCH rows per insert, two inserts in flight, into a table of the
 * project's DDL. Reported per format: the server's CPU per row (all its threads, /proc) while the
 * inserts run and until its merges of them have ended too (what an insert costs in the end),
 * rows/s, body bytes per row, and the client's encode time per row. Each format runs `rounds`
 * times, interleaved, after one unmeasured warm-up round, each round into a fresh table and only
 * once the server's merges of the round before have ended.
 * Usage: [BENCH_BATCH_SIZE=10000] bun scripts/bench/insert-formats.ts [rows=1000000] [rounds=3]
 *        (services running; ClickHouse 18.16 from scripts/services.sh)
 */
import { Readable } from "node:stream";
import { decode, type CdrRow } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { RowBuffer } from "../../src/clickhouse/row-encoder.ts";
import { COLUMNS } from "../../src/clickhouse/row-format.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { processCpuSeconds, servicePid } from "../lib/harness.ts";

const N = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const BATCH = Number(process.env.BENCH_BATCH_SIZE ?? 10_000);
const URL_ = process.env.CLICKHOUSE_URL ?? "http://localhost:8123";
const INGESTED_AT = 1_796_078_875;

const ctx = { phone: new PhoneNormalizer({ cacheSize: 100_000 }) };
const gen = new SyntheticCdrs({ seed: 5, invalidShare: 0 });
const rows: CdrRow[] = [];
while (rows.length < N) {
  const d = decode(gen.next().text, ctx);
  if (d.ok) rows.push(d.row);
}

/** Native: a block header, then each column's values back to back (strings as in RowBinary). */
function nativeBlock(rs: CdrRow[]): Uint8Array {
  const varint = (n: number) => {
    const b: number[] = [];
    while (n >= 0x80) b.push((n & 0x7f) | 0x80), (n = Math.floor(n / 128));
    b.push(n);
    return Uint8Array.from(b);
  };
  const str = (s: string) => {
    const b = Buffer.from(s, "utf8");
    return Buffer.concat([varint(b.length), b]);
  };
  const TYPES = ["UUID", "String", "String", "String", "String", "Enum8('3G' = 1, 'LTE_4G' = 6, '5G_NR' = 9)", "String",
    "DateTime('UTC')", "DateTime('UTC')", "UInt32", "UInt64", "UInt64", "UInt64", "UInt32", "DateTime('UTC')"];
  // A value's bytes are the same in both formats: encode each row in RowBinary, cut out its columns.
  const rb = new RowBinaryBuffer(1 << 12);
  const colBytes: Buffer[][] = COLUMNS.map(() => []);
  for (const r of rs) {
    rb.reset();
    rb.add(r, INGESTED_AT);
    const b = Buffer.from(rb.bytes());
    let p = 0;
    const take = (n: number) => b.subarray((p += n) - n, p);
    const takeStr = () => {
      const from = p;
      let len = 0, shift = 0, c: number;
      do { c = b[p++]!; len += (c & 0x7f) * 2 ** shift; shift += 7; } while (c & 0x80);
      p += len;
      return b.subarray(from, p);
    };
    const cols = [take(16), takeStr(), takeStr(), takeStr(), takeStr(), take(1), takeStr(), take(4), take(4), take(4), take(8), take(8), take(8), take(4), take(4)];
    cols.forEach((c, i) => colBytes[i]!.push(c));
  }
  const parts: Uint8Array[] = [varint(COLUMNS.length), varint(rs.length)];
  COLUMNS.forEach((name, i) => parts.push(str(name), str(TYPES[i]!), Buffer.concat(colBytes[i]!)));
  return Buffer.concat(parts);
}

const chunks = Array.from({ length: Math.ceil(N / BATCH) }, (_, i) => rows.slice(i * BATCH, (i + 1) * BATCH));
type Format = "TabSeparated" | "RowBinary" | "Native";
const encodeUs: Record<Format, number> = { TabSeparated: 0, RowBinary: 0, Native: 0 };
const encode = (f: Format, rs: CdrRow[]): Uint8Array => {
  if (f === "Native") return nativeBlock(rs);
  const buf = f === "RowBinary" ? new RowBinaryBuffer(1 << 22) : new RowBuffer(1 << 22);
  for (const r of rs) buf.add(r, INGESTED_AT);
  return buf.bytes().slice();
};
const bodies = {} as Record<Format, Uint8Array[]>;
for (const f of ["TabSeparated", "RowBinary", "Native"] as Format[]) {
  bodies[f] = chunks.map((c) => encode(f, c));
  if (f !== "Native") {
    // The worker's encoders, timed alone (Native is encoded here by a slow stand-in, not timed).
    const t0 = performance.now();
    for (const c of chunks) encode(f, c);
    encodeUs[f] = ((performance.now() - t0) * 1000) / N;
  }
}

const ch = createClickHouse({ url: URL_, user: "default", password: "", database: "default", table: "x", requestTimeoutMs: 120_000 }, "default");
const table = `bench.formats_${process.pid}`;
const chPid = servicePid("clickhouse");

/** Until the server has merged for 2 s nothing (its merges of the last round are done). */
async function quiesce(): Promise<void> {
  let idleSince = performance.now();
  while (performance.now() - idleSince < 2000) {
    await Bun.sleep(200);
    const rs = await ch.query({ query: "SELECT count() AS c FROM system.merges", format: "JSONEachRow" });
    if (Number((await rs.json<{ c: string }>())[0]!.c) > 0) idleSince = performance.now();
  }
}

async function send(f: Format, body: Uint8Array): Promise<void> {
  const cols = f === "Native" ? "" : ` (${COLUMNS.join(", ")})`;
  const r = await ch.exec({ query: `INSERT INTO ${table}${cols} FORMAT ${f}`, values: Readable.from([Buffer.from(body)], { objectMode: false }), ignore_error_response: true });
  let text = "";
  for await (const c of r.stream) text += c;
  if ((r.http_status_code ?? 200) >= 300) throw new Error(`${f}: ${text}`);
}

async function round(f: Format): Promise<{ cpuUs: number; mergedCpuUs: number; rowsPerS: number }> {
  await ch.command({ query: `DROP TABLE IF EXISTS ${table}` });
  await migrate(ch, "bench", `formats_${process.pid}`);
  await quiesce();
  const c0 = processCpuSeconds(chPid);
  const t0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (const b of bodies[f]) {
    inflight.push(send(f, b));
    if (inflight.length >= 2) await inflight.shift();
  }
  await Promise.all(inflight);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = processCpuSeconds(chPid) - c0;
  const count = Number((await (await ch.query({ query: `SELECT count() AS c FROM ${table}`, format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);
  if (count !== N) throw new Error(`${f}: ${count} rows stored of ${N}`);
  await quiesce();
  // The 2 s of quiet that quiesce() waits for cost the server next to nothing (a few polls).
  const merged = processCpuSeconds(chPid) - c0;
  return { cpuUs: (cpu * 1e6) / N, mergedCpuUs: (merged * 1e6) / N, rowsPerS: N / seconds };
}

const formats: Format[] = ["TabSeparated", "RowBinary", "Native"];
for (const f of formats) await round(f); // warm-up
const results: Record<string, { cpu: number[]; merged: number[]; rate: number[] }> = {};
for (let k = 0; k < ROUNDS; k++)
  for (const f of formats) {
    const r = await round(f);
    (results[f] ??= { cpu: [], merged: [], rate: [] }).cpu.push(+r.cpuUs.toFixed(2));
    results[f]!.merged.push(+r.mergedCpuUs.toFixed(2));
    results[f]!.rate.push(Math.round(r.rowsPerS));
  }
await ch.command({ query: `DROP TABLE ${table}` });
await ch.close();
const version = chPid ? "18.16 (scripts/services.sh)" : URL_;
console.log(JSON.stringify({
  rows: N, batch_size: BATCH, rounds: ROUNDS, server: version,
  formats: Object.fromEntries(formats.map((f) => [f, {
    server_cpu_us_per_row: results[f]!.cpu,
    server_cpu_with_merges_us_per_row: results[f]!.merged,
    rows_per_s: results[f]!.rate,
    body_bytes_per_row: +(bodies[f].reduce((a, b) => a + b.length, 0) / N).toFixed(1),
    client_encode_us_per_row: f === "Native" ? null : +encodeUs[f].toFixed(3),
  }])),
}));
process.exit(0);
