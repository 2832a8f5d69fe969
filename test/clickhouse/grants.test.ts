// The worker's user is made with its password's SHA-256 in the statement: the password itself is in
// no statement's text, and so in no URL or log (migrate --user). 26.9's own parser takes the
// statements (test/e2e/least-privilege.test.ts formats them with formatQuery).
import { expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { userStatements } from "../../src/clickhouse/grants.ts";

setDefaultTimeout(60_000);

test("userStatements carry the password's SHA-256, never the password; a bad name is refused", () => {
  const password = "s3cret-'quote";
  const hex = createHash("sha256").update(password).digest("hex");
  const statements = userStatements("cdr_worker", password);
  expect(statements).toEqual([
    `CREATE USER IF NOT EXISTS cdr_worker IDENTIFIED WITH sha256_hash BY '${hex}'`,
    `ALTER USER cdr_worker IDENTIFIED WITH sha256_hash BY '${hex}'`,
  ]);
  for (const s of statements) expect(s).not.toContain("s3cret");
  expect(() => userStatements("cdr worker; DROP", password)).toThrow();
});
