/**
 * µs per record from fetched bytes to the RowBinary insert body, by the two paths the worker has:
 * decode() then RowBinaryBuffer.add (the reference), and the single pass, scanRecord() then
 * addScanned (falling back to the reference where it declines). Then the parts the single pass
 * changed, each alone: the phone verdict (cache by text vs by number key) and the cdr_id
 * (Bun.randomUUIDv5 of the string vs SHA-1 of the payload's bytes).
 *
 * Payloads are copied out of one slab per 1,000 records, as the consumer hands them over, so no
 * path sees strings the engine has met before. Same synthetic stream as the e2e bench (3 % invalid).
 * Usage: bun scripts/bench/single-pass.ts [records=300000]
 */
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { scanRecord } from "../../src/cdr/record-scan.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";

const N = Number(process.argv[2] ?? 300_000);
const enc = new TextEncoder();

/** The payloads as views into slabs of 1,000, freshly made for each pass. */
function payloads(seed: number): Uint8Array[] {
  const gen = new SyntheticCdrs({ seed, callers: 100_000, invalidShare: 0.03 });
  const out: Uint8Array[] = [];
  for (let i = 0; i < N; i += 1000) {
    const texts = Array.from({ length: Math.min(1000, N - i) }, () => enc.encode(gen.next().text));
    const slab = new Uint8Array(texts.reduce((n, t) => n + t.length, 0));
    let off = 0;
    for (const t of texts) {
      slab.set(t, off);
      out.push(slab.subarray(off, (off += t.length)));
    }
  }
  return out;
}

function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
}

/** Median µs per record of `run` over 5 passes, each on fresh payloads and a warm phone cache. */
function measure(name: string, run: (records: Uint8Array[], phone: PhoneNormalizer, body: RowBinaryBuffer) => void): number {
  const phone = new PhoneNormalizer({ cacheSize: 200_000 });
  const body = new RowBinaryBuffer(1 << 20);
  run(payloads(1), phone, body); // warm-up: JIT, and the phone cache filled as in a running worker
  const us: number[] = [];
  for (let pass = 0; pass < 5; pass++) {
    const records = payloads(1);
    Bun.gc(true);
    const t0 = performance.now();
    run(records, phone, body);
    us.push(((performance.now() - t0) * 1000) / records.length);
  }
  const m = median(us);
  console.log(`${name.padEnd(44)} ${m.toFixed(3)} µs/record`);
  return m;
}

const reference = measure("decode() + add()", (records, phone, body) => {
  const ctx = { phone };
  for (let i = 0; i < records.length; i++) {
    const d = decode(records[i]!, ctx);
    if (d.ok) body.add(d.row, 1_700_000_000, 0, i);
    if (body.length > 1 << 24) body.reset();
  }
  body.reset();
});

let scanned = 0;
const single = measure("scanRecord() + addScanned(), else reference", (records, phone, body) => {
  const ctx = { phone };
  scanned = 0;
  for (let i = 0; i < records.length; i++) {
    const r = scanRecord(records[i]!, phone);
    if (r !== null) {
      scanned++;
      body.addScanned(r, 1_700_000_000, 0, i);
    } else {
      const d = decode(records[i]!, ctx);
      if (d.ok) body.add(d.row, 1_700_000_000, 0, i);
    }
    if (body.length > 1 << 24) body.reset();
  }
  body.reset();
});
console.log(`single pass / reference: ${(single / reference).toFixed(2)} (${((100 * scanned) / N).toFixed(1)} % scanned)`);

// The parts, alone.
const gen = new SyntheticCdrs({ seed: 1, callers: 100_000, invalidShare: 0 });
const records = Array.from({ length: N }, () => JSON.parse(gen.next().text) as Record<string, string>);
const callers = records.map((r) => r.caller_num!);
const rawIds = records.map((r) => r.raw_id!);
const rawIdBytes = rawIds.map((s) => enc.encode(s));
const phone = new PhoneNormalizer({ cacheSize: 200_000 });
for (const c of callers) phone.normalize(c);
const keys = callers.map((c) => {
  const digits = c.replace(/^\+/, "");
  return /^\d{1,15}$/.test(digits) ? (c.startsWith("+") ? -1 : 1) * (10 ** digits.length + Number(digits)) : 0;
});

function timed(name: string, fn: () => number): void {
  fn();
  const us: number[] = [];
  let sink = 0;
  for (let pass = 0; pass < 5; pass++) {
    const t0 = performance.now();
    sink += fn();
    us.push(((performance.now() - t0) * 1000) / N);
  }
  console.log(`${name.padEnd(44)} ${median(us).toFixed(3)} µs/record${sink < 0 ? " " : ""}`);
}
timed("phone: normalize(text) (cache by text key)", () => {
  let n = 0;
  for (const c of callers) n += phone.normalize(c)?.length ?? 0;
  return n;
});
timed("phone: cached(number key)", () => {
  let n = 0;
  for (const k of keys) n += (k === 0 ? null : phone.cached(k))?.length ?? 0;
  return n;
});
timed("cdr_id: Bun.randomUUIDv5(text)", () => {
  let n = 0;
  for (const s of rawIds) n += Bun.randomUUIDv5(s, "dns").length;
  return n;
});
const input = new Uint8Array(256);
const digest = new Uint8Array(20);
timed("cdr_id: Bun.SHA1.hash(namespace + bytes)", () => {
  let n = 0;
  for (const b of rawIdBytes) {
    input.set(b, 16);
    Bun.SHA1.hash(input.subarray(0, 16 + b.length), digest);
    n += digest[0]!;
  }
  return n;
});
