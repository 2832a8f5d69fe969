// `cdr-worker probe`: what it prints and how it exits, against servers that answer, refuse, trickle
// a body for ever or send a huge one. It must print /readyz's reasons, and never hang.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/readyz") return Response.json({ status: "not_ready", reasons: ["ClickHouse does not answer ping"] }, { status: 503 });
    if (path === "/huge") return new Response("x".repeat(10 * 2 ** 20));
    if (path === "/trickle")
      return new Response(new ReadableStream({ async pull(c) { await Bun.sleep(200); c.enqueue(new TextEncoder().encode(".")); } }));
    return Response.json({ status: "ok" });
  },
});
afterAll(() => server.stop(true));

/** Runs the probe without blocking this process's event loop, which serves the server it asks. */
async function probe(path: string) {
  const t0 = performance.now();
  const url = path.startsWith("http") ? path : `${server.url}${path.slice(1)}`;
  const p = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "probe", url], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out.trim(), err: err.trim(), ms: performance.now() - t0 };
}

test("prints the status and body: /readyz's reasons show, exit 1; a 200 exits 0", async () => {
  expect(await probe("/readyz")).toMatchObject({ code: 1, out: '503 {"status":"not_ready","reasons":["ClickHouse does not answer ping"]}' });
  expect(await probe("/healthz")).toMatchObject({ code: 0, out: '200 {"status":"ok"}' });
});

test("a huge body is cut at 4 KiB; a body that never ends, or no server, ends within the 2 s bound", async () => {
  const huge = await probe("/huge");
  expect([huge.code, huge.out.length < 4200, huge.out.endsWith("[… cut at 4096 bytes]")]).toEqual([0, true, true]);
  const trickle = await probe("/trickle");
  expect(trickle.code).toBe(1);
  expect(trickle.err).toStartWith("probe: no answer from");
  expect(trickle.ms).toBeLessThan(10_000);
  const none = await probe("http://127.0.0.1:9/readyz");
  expect([none.code, none.out, none.err]).toEqual([1, "", expect.stringMatching(/^probe: no answer from http:\/\/127\.0\.0\.1:9\/readyz within 2000 ms/)]);
});
