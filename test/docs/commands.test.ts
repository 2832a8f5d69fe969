// docs/commands.md is written from the commands' help (src/cli/help.ts) and their flags
// (COMMAND_FLAGS): the page is held to both, the help to the flags (each flag a command takes is
// described, and no flag described is one it refuses), and --help to the same text.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { commandsPage } from "../../scripts/docs/commands.ts";
import { COMMAND_FLAGS, FLAG } from "../../src/cli/args.ts";
import { HELP, SUMMARIES } from "../../src/cli/help.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const page = () => readFileSync(`${ROOT}/docs/commands.md`, "utf8");

test("docs/commands.md is what the code gives (regenerate: bun scripts/docs/commands.ts), and a changed flag or help would show", () => {
  expect(page()).toBe(commandsPage());
  const withFlag = { ...COMMAND_FLAGS, audit: { ...COMMAND_FLAGS.audit, "new-flag": FLAG.toggle } };
  expect(commandsPage(HELP, withFlag)).not.toBe(page());
  expect(commandsPage({ ...HELP, probe: "changed" })).not.toBe(page());
  expect(commandsPage(HELP, COMMAND_FLAGS, { ...SUMMARIES, run: { usage: "run", summary: "changed" } })).not.toBe(page());
});

test("every command has its help, its summary and its flags; its help names each flag it takes and no other", () => {
  const commands = Object.keys(COMMAND_FLAGS).filter((c) => c !== "help");
  expect(Object.keys(HELP).sort()).toEqual(commands.sort());
  expect(Object.keys(SUMMARIES).sort()).toEqual(commands.sort());
  for (const c of commands) {
    const taken = Object.keys(COMMAND_FLAGS[c]!).sort();
    const described = [...new Set([...HELP[c]!.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]!))].filter((f) => f !== "help").sort();
    expect({ command: c, described }).toEqual({ command: c, described: taken });
  }
});

test("`cdr-worker <command> --help` prints the section the page shows", () => {
  for (const c of ["check", "probe", "dlq"]) {
    const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, c, "--help"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    expect(p.stdout.toString().startsWith(HELP[c]!)).toBe(true);
    expect(page()).toContain(HELP[c]!);
  }
});
