// House rules a reader of src/ relies on, checked so they cannot erode.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { ROOT } from "./support/services.ts";

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
