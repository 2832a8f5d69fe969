// House rules a reader of src/ relies on, checked so they cannot erode.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { ROOT } from "./support/services.ts";

setDefaultTimeout(60_000);

const sources = (readdirSync(`${ROOT}/src`, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => `src/${f}`);

test("no line in src/ is longer than 120 characters", () => {
  const long = sources.flatMap((f) => readFileSync(`${ROOT}/${f}`, "utf8").split("\n").flatMap((l, i) => (l.length > 120 ? [`${f}:${i + 1} (${l.length})`] : [])));
  expect(sources.length).toBeGreaterThan(40);
  expect(long).toEqual([]);
});

test("comments in src/ point to the README, not to documents outside the repository", () => {
  const outside = sources.filter((f) => /DECISIONS\.md|processing-worker|message-broker/.test(readFileSync(`${ROOT}/${f}`, "utf8")));
  expect(outside).toEqual([]);
});

test("a bare `bun test` runs the suite as scripts/test.sh does: the preload starts the services, every file sets test.sh's timeout", async () => {
  const bunfig = await Bun.file(`${ROOT}/bunfig.toml`).text();
  expect(bunfig).toContain('preload = ["./test/support/preload.ts"]');
  const testSh = await Bun.file(`${ROOT}/scripts/test.sh`).text();
  const timeout = /bun test --timeout (\d+)/.exec(testSh)![1]!;
  const files = (readdirSync(`${ROOT}/test`, { recursive: true }) as string[]).filter((f) => f.endsWith(".test.ts"));
  expect(files.length).toBeGreaterThan(50);
  const without = files.filter((f) => !readFileSync(`${ROOT}/test/${f}`, "utf8").includes(`setDefaultTimeout(${Number(timeout).toLocaleString("en").replaceAll(",", "_")});`));
  expect(without).toEqual([]);
});

test("the root of src/ keeps only the entry, configuration, errors, exits, log, version and asset declarations; the stage order fits a screen", () => {
  const root = readdirSync(`${ROOT}/src`, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name).sort();
  expect(root).toEqual(["assets.d.ts", "config.ts", "errors.ts", "exits.ts", "log.ts", "main.ts", "version.ts"]);
  expect(readFileSync(`${ROOT}/src/worker/worker.ts`, "utf8").split("\n").length).toBeLessThanOrEqual(125);
});
