// The whole tree type-checks under tsconfig's strict settings.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "./support/services.ts";

setDefaultTimeout(60_000);

test("tsc --noEmit passes", async () => {
  const proc = Bun.spawn(["bun", "x", "tsc", "--noEmit", "-p", ROOT], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
  expect(out).toBe("");
  expect(code).toBe(0);
}, 60_000);
