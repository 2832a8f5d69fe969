/**
 * Records/s of the pure pipeline (bytes → row or rejection) on one core, for
 *   (a) a realistic mix: 100k distinct callers, Zipf-like repeats, 3 % invalid;
 *   (b) all-distinct callers (phone cache never hits).
 * Usage: bun scripts/bench/pipeline.ts [records=300000]
 *
 * Allocation: JavaScriptCore reports, at each garbage collection it requests, the bytes allocated
 * since the previous one (BUN_JSC_logGC=1). A child process decodes the corpus ALLOC_PASSES times
 * with that log on; the bench sums the figures between the child's markers. Bytes allocated after
 * the last collection are not counted, so the figure is a lower bound, short by at most one
 * collection threshold spread over all records (printed as allocation_uncertainty_bytes).
 */
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";

const N = Number(process.argv[2] ?? 300_000);
const ALLOC_CHILD = process.argv[3];
const ALLOC_PASSES = 5;
const CACHE_SIZE = Number(process.env.BENCH_PHONE_CACHE_SIZE ?? 100_000);
const enc = new TextEncoder();

function corpus(callers: number, seed: number): Uint8Array[] {
  const g = new SyntheticCdrs({ seed, callers, invalidShare: 0.03 });
  return Array.from({ length: N }, () => enc.encode(g.next().text));
}

// This VM's speed drifts ±30 % between runs; each case is timed over several passes of the
// whole corpus and the median pass is reported (all passes too).
const PASSES = 5;

/** In the child: decode the corpus ALLOC_PASSES times between markers on stderr. */
function allocChild(values: Uint8Array[]): void {
  const ctx = { phone: new PhoneNormalizer({ cacheSize: CACHE_SIZE }) };
  for (let i = 0; i < Math.min(20_000, values.length); i++) decode(values[i]!, ctx);
  Bun.gc(true);
  console.error("ALLOC_START");
  for (let pass = 0; pass < ALLOC_PASSES; pass++) {
    ctx.phone = new PhoneNormalizer({ cacheSize: CACHE_SIZE });
    for (const v of values) decode(v, ctx);
  }
  console.error("ALLOC_END");
}

function allocation(name: string): { bytes_per_record: number; uncertainty: number } {
  const child = Bun.spawnSync([process.execPath, import.meta.path, String(N), name], { env: { ...process.env, BUN_JSC_logGC: "1" }, stderr: "pipe", stdout: "ignore" });
  const log = child.stderr.toString();
  const inside = log.slice(log.indexOf("ALLOC_START"), log.indexOf("ALLOC_END"));
  let bytes = 0;
  let threshold = 0;
  for (const m of inside.matchAll(/bytes allocated this cycle: (\d+) exceed bytes allowed: (\d+)/g)) {
    bytes += Number(m[1]);
    threshold = Math.max(threshold, Number(m[2]));
  }
  const records = N * ALLOC_PASSES;
  return { bytes_per_record: Math.round(bytes / records), uncertainty: Math.round(threshold / records) };
}

function run(name: string, values: Uint8Array[]): void {
  const phone = new PhoneNormalizer({ cacheSize: CACHE_SIZE });
  const ctx = { phone };
  // Warm-up on a slice so the JIT has compiled the hot path before timing.
  for (let i = 0; i < Math.min(20_000, values.length); i++) decode(values[i]!, ctx);
  const rates: number[] = [];
  let ok = 0;
  let hitRate = 0;
  let heapGrowth = 0;
  for (let pass = 0; pass < PASSES; pass++) {
    // A fresh cache per pass: every pass pays the first sight of each caller, as a live run does.
    const fresh = new PhoneNormalizer({ cacheSize: CACHE_SIZE });
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
  const alloc = allocation(name);
  const rate = sorted[sorted.length >> 1]!;
  console.log(JSON.stringify({
    case: name, records: values.length, valid: ok, records_per_s: rate, passes_records_per_s: rates,
    phone_cache_hit_rate: +hitRate.toFixed(3),
    heap_growth_mb_during_pass: +heapGrowth.toFixed(1),
    allocated_bytes_per_record: alloc.bytes_per_record, allocation_uncertainty_bytes: alloc.uncertainty,
    allocation_mb_per_s: Math.round((alloc.bytes_per_record * rate) / 2 ** 20),
  }));
}

const CASES: Record<string, () => Uint8Array[]> = {
  realistic_mix: () => corpus(100_000, 1),
  all_distinct_callers: () => corpus(0, 2),
};
if (ALLOC_CHILD !== undefined) allocChild(CASES[ALLOC_CHILD]!());
else for (const [name, make] of Object.entries(CASES)) run(name, make());
