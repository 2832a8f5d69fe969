// A secret that follows its file (src/secrets/secret-file.ts): read again on demand and at most every
// REREAD_INTERVAL_MS on use; a file that cannot be read keeps the last value.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REREAD_INTERVAL_MS, SecretFile } from "../../src/secrets/secret-file.ts";

setDefaultTimeout(60_000);

const dir = mkdtempSync(join(tmpdir(), "cdr-secret-file-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fileWith(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

test("a secret file is read again at the interval on use, its trailing newline dropped; unchanged content is no change", () => {
  let now = 0;
  const path = fileWith("interval", "one\n");
  const s = new SecretFile(path, "one", () => now);
  writeFileSync(path, "two\n");
  now = REREAD_INTERVAL_MS - 1;
  expect(s.value).toBe("one");
  now = REREAD_INTERVAL_MS;
  expect(s.value).toBe("two");
  expect(s.generation).toBe(1);
  expect(s.reread()).toBe(false);
  expect(s.generation).toBe(1);
});

test("a file that cannot be read keeps the last password", () => {
  const path = fileWith("gone", "kept\n");
  const s = new SecretFile(path, "kept");
  rmSync(path);
  expect(s.reread()).toBe(false);
  expect(s.value).toBe("kept");
});
