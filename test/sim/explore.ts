/**
 * Seeded exploration: fast-check draws schedules from a seed until the time budget is spent, runs
 * each, and on a violation that is not known (known.ts) shrinks the schedule to a minimal one that
 * still shows it. The same seed draws the same schedules, so `SIM_SEED` replays a run. With `hunt`
 * a known signature counts as the finding instead (how a fixture is made).
 */
import fc from "fast-check";
import { knownCause } from "./known.ts";
import { scheduleArb, type Schedule } from "./schedule.ts";
import { simulate, type RunReport } from "./world.ts";

export interface Exploration {
  seed: number;
  runs: number;
  ms: number;
  /** Runs that showed each signature, known ones included. */
  signatures: Map<string, number>;
  /** Runs that counted offsets apart as the spec's exhausted path with rows no endpoint could read, and those offsets. */
  exhausted: { runs: number; offsets: number };
  /** The shrunk schedule of a finding, and its report. */
  finding: { schedule: Schedule; report: RunReport; signature: string } | null;
}

export async function explore(opts: { seed: number; ms: number; hunt?: string }): Promise<Exploration> {
  const started = performance.now();
  const signatures = new Map<string, number>();
  const exhausted = { runs: 0, offsets: 0 };
  let runs = 0;
  let shrinking = false;
  const finds = (r: RunReport) =>
    r.violations.find((v) => (opts.hunt ? v.signature === opts.hunt : !knownCause(v.signature)));
  const result = await fc.check(
    fc.asyncProperty(scheduleArb, async (s) => {
      const r = await simulate(s);
      if (!shrinking) {
        runs++;
        for (const sig of new Set(r.violations.map((v) => v.signature))) signatures.set(sig, (signatures.get(sig) ?? 0) + 1);
        if (r.exhaustedUnknown > 0) [exhausted.runs, exhausted.offsets] = [exhausted.runs + 1, exhausted.offsets + r.exhaustedUnknown];
      }
      const found = finds(r);
      if (found) shrinking = true;
      return found === undefined;
    }),
    {
      seed: opts.seed,
      numRuns: Number.MAX_SAFE_INTEGER,
      // The budget ends the search and any shrink under way: the smallest schedule found so far stands.
      interruptAfterTimeLimit: opts.ms,
      markInterruptAsFailure: false,
      endOnFailure: false,
    },
  );
  let finding: Exploration["finding"] = null;
  if (result.failed && result.counterexample) {
    const [schedule] = result.counterexample;
    const report = await simulate(schedule);
    const v = finds(report);
    if (v) finding = { schedule, report, signature: v.signature };
  }
  return { seed: opts.seed, runs, ms: performance.now() - started, signatures, exhausted, finding };
}
