// The test command's per-run arguments (scripts/lib/test-args.sh): a bare `bash scripts/test.sh`
// must give its later runs no argument at all, since `bun test ""` runs every file.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

function argsFor(...args: string[]): string[] {
  const script = `source ${ROOT}/scripts/lib/test-args.sh; mapfile -d '' -t a < <(args_for "$@"); for x in "\${a[@]}"; do printf '[%s]\\n' "$x"; done`;
  const p = Bun.spawnSync(["bash", "-c", script, "bash", ...args], { stdout: "pipe", stderr: "pipe" });
  expect(`${p.stderr}`).toBe("");
  return `${p.stdout}`.split("\n").filter((l) => l !== "");
}

test("no arguments give a run no argument, not an empty one", () => {
  expect(argsFor("serial")).toEqual([]);
});

test("a report named for the whole suite is written per run; other arguments pass as they are", () => {
  expect(argsFor("kafka-4.4.0", "--reporter=junit", "--reporter-outfile=.local/junit.xml", "--bail")).toEqual([
    "[--reporter=junit]", "[--reporter-outfile=.local/junit.kafka-4.4.0.xml]", "[--bail]",
  ]);
});
