// scripts/librdkafka/patches/: the series build.sh applies names every patch once, and README.md
// gives each one its four facts (the defect, upstream, the test that fails without it, when to drop
// it), naming tests that exist.
import { expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const DIR = `${ROOT}/scripts/librdkafka/patches`;
const FACTS = ["Defect", "Upstream", "Fails without it", "Drop when"];

test("the series names every patch once; README.md gives each its defect, upstream, failing test and condition to drop, naming tests that exist", () => {
  const series = readFileSync(`${DIR}/series`, "utf8").split("\n").filter((l) => l && !l.startsWith("#"));
  const present = readdirSync(DIR).filter((f) => f.endsWith(".patch")).sort();
  expect([...series].sort()).toEqual(present);
  expect(new Set(series).size).toBe(series.length);
  const readme = readFileSync(`${DIR}/README.md`, "utf8");
  const sections = readme.split(/^## /m).slice(1);
  expect(sections.map((s) => s.split("\n")[0])).toEqual(series);
  for (const s of sections) {
    const name = s.split("\n")[0];
    expect({ name, facts: FACTS.filter((f) => !s.includes(`- **${f}**:`)) }).toEqual({ name, facts: [] });
    const tests = [...s.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((m) => m[1]!);
    expect({ name, tests: tests.length > 0 }).toEqual({ name, tests: true });
    for (const t of tests) expect({ name, t, exists: existsSync(`${ROOT}/${t}`) }).toEqual({ name, t, exists: true });
  }
});
