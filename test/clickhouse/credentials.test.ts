// The ClickHouse password follows its file (src/clickhouse/credentials.ts): a client made anew only
// when the secret file's content changed.
// The e2e proof against 18.16's users file is test/e2e/operator-faults.test.ts.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import type { ClickHouseClient } from "@clickhouse/client";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renewCredentials, rotatingClient } from "../../src/clickhouse/credentials.ts";
import { SecretFile } from "../../src/secrets/secret-file.ts";

setDefaultTimeout(60_000);

const dir = mkdtempSync(join(tmpdir(), "cdr-credentials-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fileWith(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

test("a rotating client is made anew with the new password after a refusal, and only then", () => {
  const path = fileWith("client", "old\n");
  const s = new SecretFile(path, "old");
  const made: string[] = [];
  const fake = (password: string) => ({ password, close: async () => {}, exec: () => password }) as unknown as ClickHouseClient;
  const client = rotatingClient(s, (pw) => (made.push(pw), fake(pw)), 1);
  expect((client as unknown as { exec: () => string }).exec()).toBe("old");
  writeFileSync(path, "new\n");
  // Within the interval the file is not read again until the server refuses.
  expect((client as unknown as { exec: () => string }).exec()).toBe("old");
  renewCredentials(client);
  expect((client as unknown as { exec: () => string }).exec()).toBe("new");
  expect((client as unknown as { exec: () => string }).exec()).toBe("new");
  expect(made).toEqual(["old", "new"]);
});
