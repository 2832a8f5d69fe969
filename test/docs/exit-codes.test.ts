// docs/exit-codes.md is written from src/exits.ts (scripts/docs/exit-codes.ts), the closed list every
// exit goes through: the page is held to the list, the list to the code (no other exit), and a few
// of its entries to what the executable really returns.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { exitCodesPage } from "../../scripts/docs/exit-codes.ts";
import { EXITS, type ExitKind } from "../../src/exits.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const page = () => readFileSync(`${ROOT}/docs/exit-codes.md`, "utf8");

test("docs/exit-codes.md is what src/exits.ts gives (regenerate: bun scripts/docs/exit-codes.ts), and a changed list would show", () => {
  expect(page()).toBe(exitCodesPage());
  for (const [name, e] of Object.entries(EXITS)) expect(page()).toContain(`| **${e.code}** | \`${name}\` |`);
  // The drift the test exists for: a code or a cause changed in the list makes another page.
  expect(exitCodesPage({ ...EXITS, OK: { ...EXITS.OK, code: 1 } })).not.toBe(page());
  expect(exitCodesPage({ ...EXITS, PROBE_FAILED: { ...EXITS.PROBE_FAILED, when: "changed" } })).not.toBe(page());
});

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = `${dir}/${f}`;
    return statSync(p).isDirectory() ? sources(p) : p.endsWith(".ts") ? [p] : [];
  });
}

test("no exit bypasses the list: process.exit only in src/exits.ts and main's last line, process.exitCode nowhere", () => {
  const exits: string[] = [];
  for (const file of sources(`${ROOT}/src`)) {
    const rel = file.slice(ROOT.length + 1);
    readFileSync(file, "utf8").split("\n").forEach((line, i) => {
      if (/process\.exit(Code)?\b/.test(line) && !line.trimStart().startsWith("//") && !line.trimStart().startsWith("*"))
        exits.push(`${rel}:${i + 1}: ${line.trim()}`);
    });
  }
  expect(exits.map((e) => e.replace(/:\d+:/, ":"))).toEqual([
    "src/exits.ts: process.exit(EXITS[kind].code);",
    "src/main.ts: process.exit(EXITS[ended].code);",
  ]);
});

async function exitOf(args: string[], env: Record<string, string> = {}): Promise<{ code: number; err: string }> {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  const [err] = await Promise.all([new Response(proc.stderr).text(), new Response(proc.stdout).text()]);
  return { code: await proc.exited, err };
}

test.each([
  ["OK", ["version"], {}, ""],
  ["USAGE", ["no-such-command"], {}, 'unknown command "no-such-command"'],
  ["USAGE", ["dlq", "nothing"], {}, "dlq inspect"],
  ["CONFIG", ["run"], { BATCH_SIZE: "zero" }, "config error: BATCH_SIZE="],
  // Exactly-once signs the DLQ's envelopes by default: `run` without a key says how to make one.
  ["CONFIG", ["run"], { DLQ_PROVENANCE_KEY: "" }, "config error: DLQ_PROVENANCE_KEY=(unset): expected a key under exactly-once: `openssl rand -hex 32"],
  ["CONFIG", ["run"], { DLQ_PROVENANCE: "unsigned", DLQ_PROVENANCE_KEY: "k".repeat(32) }, 'config error: DLQ_PROVENANCE="unsigned"'],
  ["PROBE_FAILED", ["probe", "http://127.0.0.1:9/readyz"], {}, "probe: no answer from http://127.0.0.1:9/readyz within 2000 ms"],
] as Array<[ExitKind, string[], Record<string, string>, string]>)("%s: `cdr-worker %p` exits as the list says", async (kind, args, env, says) => {
  const { code, err } = await exitOf(args, env);
  expect(code).toBe(EXITS[kind].code);
  expect(err).toContain(says);
});
