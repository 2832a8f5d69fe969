// House rules a reader of src/ relies on, checked so they cannot erode.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { circles, importsOf, roomImports } from "./support/imports.ts";
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

const imports = importsOf(ROOT, sources);

test("imports in src/ run one way: no circle between files, none between rooms (each circle named by its imports)", () => {
  expect(imports.length).toBeGreaterThan(300);
  expect(circles(imports)).toEqual([]);
  expect(circles(roomImports(imports))).toEqual([]);
});

test("the circle check finds a circle and names the imports that tie it, between files and between rooms", () => {
  const tied = [
    { from: "src/cdr/decode.ts", to: "src/dlq/envelope.ts" },
    { from: "src/dlq/envelope.ts", to: "src/cdr/fields.ts" },
    { from: "src/cdr/fields.ts", to: "src/cdr/decode.ts" },
    { from: "src/log.ts", to: "src/errors.ts" },
  ];
  expect(circles(tied)).toEqual([["src/cdr/decode.ts -> src/dlq/envelope.ts", "src/cdr/fields.ts -> src/cdr/decode.ts", "src/dlq/envelope.ts -> src/cdr/fields.ts"]]);
  expect(circles(roomImports(tied))).toEqual([["cdr/ -> dlq/ (src/cdr/decode.ts -> src/dlq/envelope.ts)", "dlq/ -> cdr/ (src/dlq/envelope.ts -> src/cdr/fields.ts)"]]);
});

test("configuration flows down as values: only the command line and the entry read config.ts", () => {
  const readers = [...new Set(imports.filter((i) => i.to === "src/config.ts").map((i) => i.from))];
  expect(readers.length).toBeGreaterThan(5);
  expect(readers.filter((f) => !f.startsWith("src/cli/") && f !== "src/main.ts")).toEqual([]);
});
