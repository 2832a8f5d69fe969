/**
 * The fuzzing harness: fast-check properties over bytes, run for a time budget from a printed seed,
 * and every input that ever failed kept as a fixture (test/fixtures/fuzz/<target>.json) and replayed
 * on every run. Used by test/fuzz/ (a fixed budget in the suite) and scripts/fuzz.ts (as long as
 * asked, saving what it finds).
 *
 * fast-check, not a coverage-guided fuzzer: none runs under Bun's JavaScriptCore (Jazzer.js needs
 * Node's V8 instrumentation), while fast-check runs inside `bun test`, shrinks a failure to a small
 * input, and replays a run exactly from its seed. Coverage is aimed for by the generators instead:
 * each composes the hostile properties the parser must survive together, not one at a time.
 */
import fc from "fast-check";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** A parser of outside bytes and what must hold for any input. */
export interface FuzzTarget {
  name: string;
  /** What the inputs are made of, in a few words (printed with the figures). */
  inputs: string;
  arbitrary: fc.Arbitrary<Uint8Array>;
  /** Throws when the property does not hold for these bytes. */
  check(bytes: Uint8Array): void;
}

export interface FuzzRun {
  target: string;
  seed: number;
  runs: number;
  ms: number;
  perSecond: number;
  /** The shrunk input that failed, and why; null when none did. */
  failure: { bytes: Uint8Array; error: string } | null;
}

export const FIXTURES_DIR = join(import.meta.dir, "../fixtures/fuzz");

/** The seed: FUZZ_SEED when set (to replay a run), else a fresh one. */
export function fuzzSeed(): number {
  const env = process.env.FUZZ_SEED;
  return env !== undefined && env !== "" ? Number(env) : (Math.random() * 2 ** 31) | 0;
}

/** Runs `target` for about `ms` milliseconds from `seed`. */
export function fuzz(target: FuzzTarget, seed: number, ms: number): FuzzRun {
  const started = performance.now();
  const details = fc.check(
    fc.property(target.arbitrary, (bytes) => {
      target.check(bytes);
    }),
    { seed, numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: ms, markInterruptAsFailure: false },
  );
  const took = performance.now() - started;
  const failure =
    details.failed && details.counterexample
      ? { bytes: details.counterexample[0], error: describe(details.errorInstance) }
      : null;
  return {
    target: target.name,
    seed,
    runs: details.numRuns,
    ms: Math.round(took),
    perSecond: Math.round((details.numRuns / took) * 1000),
    failure,
  };
}

/** A fixture: an input that once failed, kept with what it showed. */
export interface FuzzFixture {
  found: string;
  base64: string;
}

export function fixtures(target: string): FuzzFixture[] {
  const file = join(FIXTURES_DIR, `${target}.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as FuzzFixture[]) : [];
}

/** Keeps a failing input as a fixture of its target (once). */
export function saveFixture(target: string, bytes: Uint8Array, found: string): string {
  const file = join(FIXTURES_DIR, `${target}.json`);
  const all = fixtures(target);
  const base64 = Buffer.from(bytes).toString("base64");
  if (!all.some((f) => f.base64 === base64)) all.push({ found, base64 });
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(all, null, 1) + "\n");
  return file;
}

export function fixtureBytes(f: FuzzFixture): Uint8Array {
  return new Uint8Array(Buffer.from(f.base64, "base64"));
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}`.slice(0, 500) : String(e).slice(0, 500);
}
