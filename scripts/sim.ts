/**
 * The delivery simulation, longer than CI runs it (test/sim/README.md).
 *
 *   bun scripts/sim.ts --seconds N [--seed S] [--hunt SIGNATURE] [--fixture NAME]
 *
 * Explores schedules from the seed (random unless given; SIM_SEED works too) for N seconds and
 * prints the signatures it saw. A violation that is not known (test/sim/known.ts) is shrunk and
 * printed, and the run exits 1. With --hunt, that signature is the finding instead; with
 * --fixture, a finding is written to test/sim/fixtures/NAME.json.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { explore } from "../test/sim/explore.ts";
import { knownCause } from "../test/sim/known.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    seed: { type: "string" },
    hunt: { type: "string" },
    fixture: { type: "string" },
  },
});
const seed = Number(values.seed ?? process.env.SIM_SEED ?? Math.floor(Math.random() * 2 ** 31));
const seconds = Number(values.seconds);
console.log(`simulation seed ${seed} for ${seconds} s${values.hunt ? `, hunting ${values.hunt}` : ""} (SIM_SEED=${seed} replays it)`);
const x = await explore({ seed, ms: seconds * 1000, ...(values.hunt ? { hunt: values.hunt } : {}) });
console.log(`${x.runs} runs in ${(x.ms / 1000).toFixed(1)} s (${(x.runs / (x.ms / 1000)).toFixed(1)} a second)`);
console.log(`  the spec's exhausted path, rows unreadable, stored and dead-lettered: ${x.exhausted.offsets} offsets in ${x.exhausted.runs} runs`);
for (const [sig, n] of [...x.signatures].sort((a, b) => b[1] - a[1]))
  console.log(`  ${sig}: ${n} runs${knownCause(sig) ? ` (known: ${knownCause(sig)!.fixtures.join(", ")})` : ""}`);
if (!x.finding) {
  console.log(values.hunt ? `no run showed ${values.hunt}` : "no violation beyond the known ones");
  process.exit(values.hunt ? 1 : 0);
}
const { schedule, report, signature } = x.finding;
console.log(`finding: ${signature}, shrunk to ${schedule.faults.length} faults:`);
console.log(JSON.stringify(schedule));
for (const v of report.violations.filter((v) => v.signature === signature).slice(0, 3)) console.log(`  ${v.detail}`);
if (values.fixture) {
  const file = new URL(`../test/sim/fixtures/${values.fixture}.json`, import.meta.url).pathname;
  const fixture = { name: values.fixture, signature, expect: "violation", found: { seed, seconds }, schedule };
  writeFileSync(file, JSON.stringify(fixture, null, 2) + "\n");
  console.log(`written to ${file}`);
}
process.exit(values.hunt ? 0 : 1);
