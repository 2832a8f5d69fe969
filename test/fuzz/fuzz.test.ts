// Every parser of outside bytes under fast-check, for a fixed budget (FUZZ_BUDGET_MS, 60 s in all by
// default) from a printed seed (FUZZ_SEED replays a run), and every input that ever failed replayed
// from test/fixtures/fuzz/. `bun scripts/fuzz.ts --seconds N` runs longer and keeps what it finds.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { fixtureBytes, fixtures, fuzz, fuzzSeed } from "../support/fuzz.ts";
import { FUZZ_TARGETS } from "../support/fuzz-targets.ts";

setDefaultTimeout(60_000);

const BUDGET_MS = Number(process.env.FUZZ_BUDGET_MS ?? 60_000);
// The decoder gets half the budget: it is the parser every record meets.
const decoders = FUZZ_TARGETS.filter((t) => t.name.startsWith("decode-")).length;
const share = (name: string) => (name.startsWith("decode-") ? 0.5 / decoders : 0.5 / (FUZZ_TARGETS.length - decoders));
const seed = fuzzSeed();
console.log(`fuzz: seed ${seed} (FUZZ_SEED=${seed} replays it), budget ${BUDGET_MS} ms`);

describe.each(FUZZ_TARGETS.map((t) => [t.name, t] as const))("%s", (_name, target) => {
  test(`holds for ${target.inputs}, from the printed seed`, () => {
    const run = fuzz(target, seed, Math.round(BUDGET_MS * share(target.name)));
    console.log(`fuzz ${run.target}: ${run.runs} inputs in ${run.ms} ms, ${run.perSecond}/s, seed ${run.seed}`);
    if (run.failure)
      throw new Error(
        `${run.target} failed (seed ${run.seed}): ${run.failure.error}\n` +
          `input (base64): ${Buffer.from(run.failure.bytes).toString("base64").slice(0, 300)}…\n` +
          `keep it: bun scripts/fuzz.ts --target ${run.target} --seed ${run.seed}`,
      );
    expect(run.runs).toBeGreaterThan(0);
  });

  test("every input that ever failed still holds", () => {
    const kept = fixtures(target.name);
    for (const f of kept) {
      try {
        target.check(fixtureBytes(f));
      } catch (e) {
        throw new Error(`fixture "${f.found}" fails again: ${(e as Error).message}`);
      }
    }
    expect(kept.every((f) => f.base64.length > 0)).toBe(true);
  });
});
