/**
 * Records/s of the pure pipeline (bytes → row or rejection) on one core, for
 *   (a) a realistic mix: 100k distinct callers, Zipf-like repeats, 3 % invalid;
 *   (b) all-distinct callers (phone cache never hits).
 * Usage: bun scripts/bench/pipeline.ts [records=300000]
 */
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";

const N = Number(process.argv[2] ?? 300_000);
const enc = new TextEncoder();

function corpus(callers: number, seed: number): Uint8Array[] {
  const g = new SyntheticCdrs({ seed, callers, invalidShare: 0.03 });
  return Array.from({ length: N }, () => enc.encode(g.next().text));
}

function run(name: string, values: Uint8Array[]): void {
  const phone = new PhoneNormalizer({ cacheSize: 100_000 });
  const ctx = { phone };
  // Warm-up on a slice so the JIT has compiled the hot path before timing.
  for (let i = 0; i < Math.min(20_000, values.length); i++) decode(values[i]!, ctx);
  phone.hits = phone.misses = 0;
  Bun.gc(true);
  const heap0 = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  let ok = 0;
  for (const v of values) if (decode(v, ctx).ok) ok++;
  const ms = performance.now() - t0;
  const heap1 = process.memoryUsage().heapUsed;
  console.log(JSON.stringify({
    case: name, records: values.length, valid: ok, ms: Math.round(ms), records_per_s: Math.round(values.length / (ms / 1000)),
    phone_cache_hit_rate: +(phone.hits / Math.max(1, phone.hits + phone.misses)).toFixed(3),
    heap_growth_mb_during_run: +((heap1 - heap0) / 2 ** 20).toFixed(1),
  }));
}

run("realistic_mix", corpus(100_000, 1));
run("all_distinct_callers", corpus(0, 2));
