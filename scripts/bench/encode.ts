/**
 * µs per row of the TSV encoder (RowBuffer.add) on decoded synthetic rows, with and without a
 * live heap like the worker's (1M small objects): allocation in the encoder costs far more once
 * the collector has a real heap to walk.
 * Usage: bun scripts/bench/encode.ts [rows=200000]
 */
import { decode, type CdrRow } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { RowBuffer } from "../../src/clickhouse/row-encoder.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";

const N = Number(process.argv[2] ?? 200_000);
const gen = new SyntheticCdrs({ seed: 1, callers: 100_000, invalidShare: 0 });
const ctx = { phone: new PhoneNormalizer({ cacheSize: 100_000 }) };
const rows: CdrRow[] = [];
for (let i = 0; i < N; i++) {
  const d = decode(gen.next().text, ctx);
  if (d.ok) rows.push(d.row);
}

function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
}

function measure(): number {
  const passes: number[] = [];
  const buf = new RowBuffer(1 << 20);
  for (let pass = 0; pass < 8; pass++) {
    const t0 = performance.now();
    for (let i = 0; i < rows.length; i++) {
      buf.add(rows[i]!, 1_796_078_875);
      // Batches of 1000 rows, as the worker flushes by default.
      if (i % 1000 === 999) buf.reset();
    }
    passes.push(((performance.now() - t0) * 1000) / rows.length);
  }
  return +median(passes).toFixed(3);
}

measure(); // warm-up: the JIT compiles the encoder first
const bare = measure();
const ballast = Array.from({ length: 1_000_000 }, (_, i) => ({ i, s: `v${i}` }));
const loaded = measure();
console.log(JSON.stringify({ rows: rows.length, us_per_row: bare, us_per_row_with_live_heap: loaded, live_objects: ballast.length }));
