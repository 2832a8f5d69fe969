// The delivery simulation in CI: every kept finding replayed (fixtures/), the harness's own
// determinism, and a seeded exploration for SIM_SECONDS (60 by default) that fails on any violation
// not known (known.ts). The seed is printed; SIM_SEED replays it.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { explore } from "./explore.ts";
import { KNOWN, knownCause } from "./known.ts";
import type { Schedule } from "./schedule.ts";
import type { StoredRow } from "./clickhouse.ts";
import { simulate, unreadable } from "./world.ts";

setDefaultTimeout(60_000);

const SECONDS = Number(process.env.SIM_SECONDS ?? 60);
const FIXTURES = new URL("./fixtures/", import.meta.url).pathname;

interface Fixture {
  name: string;
  signature: string;
  /** "violation" while the hole is open; "none" once fixed. */
  expect: "violation" | "none";
  /**
   * Where the finding was the spec's exhausted path rather than a hole: the offsets the run counts
   * apart as both stored and dead-lettered for rows no endpoint could read (world.ts `exhaustedUnknown`).
   */
  exhaustedUnknown?: number;
  found: { seed: number; seconds: number };
  schedule: Schedule;
}

const fixtures: Fixture[] = readdirSync(FIXTURES)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => JSON.parse(readFileSync(FIXTURES + f, "utf8")) as Fixture);

describe("delivery simulation: kept findings", () => {
  test("every known cause has fixtures that expect it, and every open fixture's cause is known", () => {
    for (const k of KNOWN)
      for (const name of k.fixtures) {
        const f = fixtures.find((x) => x.name === name);
        expect(f?.expect, name).toBe("violation");
        expect(knownCause(f!.signature), name).toBe(k);
      }
    for (const f of fixtures.filter((x) => x.expect === "violation")) expect(knownCause(f.signature), f.name).toBeDefined();
  });

  for (const f of fixtures)
    test(`${f.name}: ${f.expect === "none" ? `no violation (was ${f.signature})` : f.signature}`, async () => {
      const r = await simulate(f.schedule);
      const seen = r.violations.map((v) => v.signature);
      if (f.expect === "violation") expect(seen).toContain(f.signature);
      else expect(seen).toEqual([]);
      if (f.exhaustedUnknown !== undefined) expect(r.exhaustedUnknown).toBe(f.exhaustedUnknown);
      // The run delivered what it could: nothing is left unaccounted for outside the finding.
      expect(r.stored + r.envelopes).toBeGreaterThan(0);
    });
});

describe("delivery simulation: the harness", () => {
  test("a run is a function of its schedule: the same schedule twice, the same outcome", async () => {
    const f = fixtures[0]!;
    const [a, b] = [await simulate(f.schedule), await simulate(f.schedule)];
    const summary = (r: typeof a) => ({
      violations: r.violations.map((v) => `${v.signature} ${v.partition}:${v.offset}`),
      stored: r.stored,
      envelopes: r.envelopes,
      events: r.events,
      ms: r.virtualMs,
    });
    expect(summary(b)).toEqual(summary(a));
    expect(a.events).toBeGreaterThan(1_000);
  });
});

describe("delivery simulation: the exhausted path counted apart", () => {
  // Worker w1 logged at 15 s that it could not read partition 0's offsets 0-16, then sent their
  // envelopes at 15.1 s. Each row is one a stored at `storedAt`; `viewed` puts it in the offsets table.
  const row = (over: Partial<StoredRow> & { by: string }): StoredRow => ({
    partition: 0,
    offset: 3,
    cdrId: "c",
    sessionStart: 0,
    ingestedAt: 0,
    queryId: `cdr-worker:${over.by}:q`,
    endpoint: 0,
    storedAt: 2_000,
    zombie: false,
    ...over,
  });
  const unread = [{ actor: "w1.0", at: 15_000, offsets: ["0:0-16", "2:0-15"] }];
  const envelope = { producer: "w1.0", sentAt: 15_100 };
  const at = { partition: 0, offset: 3 };
  const cases: Array<[string, boolean, () => boolean]> = [
    ["its own insert's row, its answer lost", true, () => unreadable(envelope, [row({ by: "w1.0" })], at, unread, [])],
    ["a last owner's row the offsets table lacks, stored before the read", true, () => unreadable(envelope, [row({ by: "w0.0" })], at, unread, [])],
    ["a last owner's row the offsets table shows: the check could find it", false, () => {
      const r = row({ by: "w0.0" });
      return unreadable(envelope, [r], at, unread, [r]);
    }],
    ["a row stored after the read", false, () => unreadable(envelope, [row({ by: "w0.0", storedAt: 15_050 })], at, unread, [])],
    ["a row stored after one read and before a later one", true, () => {
      const again = [...unread, { actor: "w1.0", at: 15_080, offsets: ["0:3-3"] }];
      return unreadable(envelope, [row({ by: "w0.0", storedAt: 15_050 })], at, again, []);
    }],
    ["a zombie's row", false, () => unreadable(envelope, [row({ by: "w0.0", zombie: true })], at, unread, [])],
    ["an offset the line does not name", false, () => unreadable(envelope, [row({ by: "w1.0", offset: 17 })], { partition: 0, offset: 17 }, unread, [])],
    ["another partition's offset", false, () => unreadable(envelope, [row({ by: "w1.0", partition: 1 })], { partition: 1, offset: 3 }, unread, [])],
    ["an envelope sent before the line", false, () => unreadable({ ...envelope, sentAt: 14_000 }, [row({ by: "w1.0" })], at, unread, [])],
    ["another worker's envelope", false, () => unreadable({ ...envelope, producer: "w2.0" }, [row({ by: "w2.0" })], at, unread, [])],
  ];
  for (const [what, counted, run] of cases)
    test(`${counted ? "counted apart" : "a violation"}: ${what}`, () => expect(run()).toBe(counted));
});

describe("delivery simulation: exploration", () => {
  test(
    `${SECONDS} s of seeded schedules show no violation beyond the known ones`,
    async () => {
      const seed = Number(process.env.SIM_SEED ?? Math.floor(Math.random() * 2 ** 31));
      console.log(`simulation seed ${seed} (SIM_SEED=${seed} replays it; bun scripts/sim.ts runs longer)`);
      const x = await explore({ seed, ms: SECONDS * 1000 });
      console.log(`${x.runs} runs in ${(x.ms / 1000).toFixed(1)} s (${(x.runs / (x.ms / 1000)).toFixed(1)} a second)`);
      for (const [sig, n] of x.signatures) console.log(`  ${sig}: ${n} runs${knownCause(sig) ? " (known)" : ""}`);
      console.log(`  the spec's exhausted path, rows unreadable, stored and dead-lettered: ${x.exhausted.offsets} offsets in ${x.exhausted.runs} runs`);
      if (x.finding) {
        const dir = new URL("../../.local/sim-findings/", import.meta.url).pathname;
        mkdirSync(dir, { recursive: true });
        const file = `${dir}${seed}.json`;
        writeFileSync(file, JSON.stringify({ ...x.finding, report: { ...x.finding.report, log: x.finding.report.log.slice(-400) } }, null, 2));
        console.log(`finding ${x.finding.signature}, shrunk schedule and log in ${file}:`);
        console.log(JSON.stringify(x.finding.schedule));
      }
      expect(x.finding?.signature ?? null).toBeNull();
      expect(x.runs).toBeGreaterThan(SECONDS);
    },
    SECONDS * 1000 + 120_000,
  );
});
