import { expect, setDefaultTimeout, test } from "bun:test";
import { integerFlag, parseArgs } from "../../src/cli/args.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("a count flag takes whole numbers within its bounds; anything else is a usage error naming the flag", () => {
  const flag = (...argv: string[]) => {
    try {
      return integerFlag(parseArgs(["topics", "ensure", ...argv]), "partitions", 3, 1, 100);
    } catch (e) {
      return (e as Error).message;
    }
  };
  expect([flag(), flag("--partitions", "12"), flag("--partitions=1")]).toEqual([3, 12, 1]);
  expect(flag("--partitions", "2.5")).toBe("--partitions=2.5: expected a whole number");
  expect(flag("--partitions", "0")).toBe("--partitions=0: expected a number from 1 to 100");
  expect(flag("--partitions")).toBe("Option '--partitions <value>' argument missing");
  expect(flag("--partitions", "")).toBe("--partitions=: expected a number from 1 to 100");
});

test("topics ensure with a bad --replication-factor exits 2 with one line, before it reaches any broker", () => {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "topics", "ensure", "--replication-factor", "2.5"], {
    env: { PATH: process.env.PATH!, KAFKA_BROKERS: "127.0.0.1:1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString().trim().split("\n")).toEqual(["config error: --replication-factor=2.5: expected a whole number"]);
});

test.each([
  [["dlq", "replay", "--reasn", "malformed_json"], "dlq", "Unknown option '--reasn'"],
  [["dlq", "replay", "--limit"], "dlq", "Option '--limit <value>' argument missing"],
  [["topics", "ensure", "--partition", "3"], "topics", "Unknown option '--partition'"],
  [["run", "--batch-size", "10"], "run", "Unknown option '--batch-size'"],
  [["migrate", "--cluster"], "migrate", "Option '--cluster <value>' argument missing"],
] as const)("%j is refused with exit 2 and the command's usage, before anything is read or sent", (argv, command, message) => {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, ...argv], {
    env: { PATH: process.env.PATH!, KAFKA_BROKERS: "127.0.0.1:1", CLICKHOUSE_URL: "http://127.0.0.1:1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(2);
  const err = p.stderr.toString();
  expect(err.split("\n")[0]).toBe(`cdr-worker ${command}: ${message}`);
  expect(err).toMatch(new RegExp(`\\n\\ncdr-worker ${command}[ :]`));
  expect(p.stdout.toString()).toBe("");
});
