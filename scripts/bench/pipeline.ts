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

// This VM's speed drifts ±30 % between runs; each case is timed over several passes of the
// whole corpus and the median pass is reported (all passes too).
const PASSES = 5;

function run(name: string, values: Uint8Array[]): void {
  const cacheSize = Number(process.env.BENCH_PHONE_CACHE_SIZE ?? 100_000);
  const phone = new PhoneNormalizer({ cacheSize });
  const ctx = { phone };
  // Warm-up on a slice so the JIT has compiled the hot path before timing.
  for (let i = 0; i < Math.min(20_000, values.length); i++) decode(values[i]!, ctx);
  const rates: number[] = [];
  let ok = 0;
  let hitRate = 0;
  let heapGrowth = 0;
  for (let pass = 0; pass < PASSES; pass++) {
    // A fresh cache per pass: every pass pays the first sight of each caller, as a live run does.
    const fresh = new PhoneNormalizer({ cacheSize });
    ctx.phone = fresh;
    Bun.gc(true);
    const heap0 = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    ok = 0;
    for (const v of values) if (decode(v, ctx).ok) ok++;
    const ms = performance.now() - t0;
    heapGrowth = (process.memoryUsage().heapUsed - heap0) / 2 ** 20;
    rates.push(Math.round(values.length / (ms / 1000)));
    hitRate = fresh.hits / Math.max(1, fresh.hits + fresh.misses);
  }
  const sorted = [...rates].sort((a, b) => a - b);
  console.log(JSON.stringify({
    case: name, records: values.length, valid: ok, records_per_s: sorted[sorted.length >> 1], passes_records_per_s: rates,
    phone_cache_hit_rate: +hitRate.toFixed(3),
    heap_growth_mb_during_pass: +heapGrowth.toFixed(1),
  }));
}

run("realistic_mix", corpus(100_000, 1));
run("all_distinct_callers", corpus(0, 2));
