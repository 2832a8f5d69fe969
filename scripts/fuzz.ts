#!/usr/bin/env bun
/**
 * Runs the fuzz targets of test/fuzz/ for as long as asked and keeps every failing input as a
 * fixture (test/fixtures/fuzz/<target>.json), which the suite then replays on every run.
 *
 *   bun scripts/fuzz.ts [--seconds N] [--target NAME] [--seed S]
 *
 * --seconds is the whole run's length (default 600), shared among the targets; --target runs one;
 * --seed starts from a seed (default: a fresh one per round, printed). Rounds repeat until the time
 * is spent. Exit 1 when anything failed.
 */
import { fuzz, saveFixture } from "../test/support/fuzz.ts";
import { FUZZ_TARGETS } from "../test/support/fuzz-targets.ts";

const args = process.argv.slice(2);
const flag = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const seconds = Number(flag("seconds") ?? 600);
const only = flag("target");
let seed = flag("seed") !== undefined ? Number(flag("seed")) : undefined;
const targets = FUZZ_TARGETS.filter((t) => only === undefined || t.name === only);
if (targets.length === 0) {
  console.error(`no target ${only}; targets: ${FUZZ_TARGETS.map((t) => t.name).join(", ")}`);
  process.exit(2);
}
// Rounds of a minute or less, so a long run prints as it goes and tries many seeds.
const round = Math.min(60_000, (seconds * 1000) / targets.length);
const deadline = Date.now() + seconds * 1000;
const totals = new Map<string, { runs: number; ms: number }>();
let failed = 0;
while (Date.now() < deadline) {
  for (const t of targets) {
    const s = seed ?? (Math.random() * 2 ** 31) | 0;
    const run = fuzz(t, s, Math.max(100, Math.min(round, deadline - Date.now())));
    const total = totals.get(t.name) ?? { runs: 0, ms: 0 };
    totals.set(t.name, { runs: total.runs + run.runs, ms: total.ms + run.ms });
    console.log(`${t.name}: seed ${s}, ${run.runs} inputs in ${run.ms} ms (${run.perSecond}/s)`);
    if (run.failure) {
      failed++;
      const file = saveFixture(t.name, run.failure.bytes, `seed ${s}: ${run.failure.error}`);
      console.log(`  FAILED: ${run.failure.error}\n  kept in ${file}`);
    }
    if (Date.now() >= deadline) break;
  }
  seed = undefined;
}
for (const [name, t] of totals) console.log(`${name}: ${t.runs} inputs, ${Math.round((t.runs / t.ms) * 1000)}/s`);
process.exit(failed ? 1 : 0);
