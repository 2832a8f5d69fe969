// The shutdown signals on a real process: the first asks for a graceful stop; a second signal, or
// the shutdown timeout, exits 1.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

async function child(timeoutMs: number) {
  const p = Bun.spawn(["bun", `${ROOT}/test/fixtures/signals-child.ts`, String(timeoutMs)], { stdout: "pipe", stderr: "pipe" });
  let out = "";
  void (async () => {
    for await (const c of p.stdout) out += new TextDecoder().decode(c);
  })();
  await waitFor(() => (out.includes("ready") ? true : undefined), 10_000, "child ready");
  return { p, out: () => out, err: () => new Response(p.stderr).text() };
}

test("SIGTERM asks for a stop; the shutdown timeout then exits 1 without committing", async () => {
  const c = await child(300);
  c.p.kill("SIGTERM");
  expect(await c.p.exited).toBe(1);
  expect(c.out()).toContain("stop");
  expect(await c.err()).toContain("shutdown timed out");
});

test("a second signal exits 1 at once", async () => {
  const c = await child(60_000);
  c.p.kill("SIGINT");
  await waitFor(() => (c.out().includes("stop") ? true : undefined), 10_000, "stop asked");
  c.p.kill("SIGTERM");
  expect(await c.p.exited).toBe(1);
  expect(await c.err()).toContain("second signal");
});
