// The README is a front page and the manual lives in docs/: every page is linked from the README,
// and every relative link and anchor in either resolves.
import { expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { ROOT } from "../support/services.ts";
import { workerNeeds } from "../../src/clickhouse/grants.ts";

setDefaultTimeout(60_000);

const pages = ["README.md", "CHANGELOG.md", ...readdirSync(`${ROOT}/docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** GitHub's anchor of a heading: lower-cased, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) => heading.toLowerCase().replace(/[^\w\- ]/g, "").replaceAll(" ", "-");

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(join(ROOT, file), "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!.trim())));
}

test("the README fits on a page (about 12 KB) and links every page of docs/", () => {
  const readme = readFileSync(`${ROOT}/README.md`, "utf8");
  expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(12 * 1024);
  for (const page of pages.filter((p) => p.startsWith("docs/"))) expect(readme).toContain(`](${page})`);
  expect(readme).toContain("bash scripts/run.sh");
  expect(readme).toContain("bash scripts/test.sh");
});

test("every relative link and anchor in the README and docs/ resolves", () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(join(ROOT, page), "utf8").replace(/```[\s\S]*?```/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1]!;
      if (/^[a-z]+:/.test(href)) continue;
      const [path, hash] = href.split("#") as [string, string | undefined];
      const target = path ? normalize(join(dirname(page), path)) : page;
      if (!existsSync(join(ROOT, target))) broken.push(`${page}: ${href} (no ${target})`);
      else if (hash && target.endsWith(".md") && !anchorsOf(target).has(hash)) broken.push(`${page}: ${href} (no heading)`);
    }
  }
  expect(broken).toEqual([]);
});

test("the README and docs/security.md count the worker's privileges as the code lists them", () => {
  const words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
  const count = words[workerNeeds("telecom", "cdr").length]!;
  expect(readFileSync(`${ROOT}/README.md`, "utf8")).toContain(`**Its own ClickHouse user**: ${count} privileges`);
  expect(readFileSync(`${ROOT}/docs/security.md`, "utf8")).toContain(`The worker needs ${count} privileges`);
});
