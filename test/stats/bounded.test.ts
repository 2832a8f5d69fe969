// The stats server's limits (src/stats/bounded.ts): requests beyond the cap and handlers that stall
// get 503 at once or at the time limit, and the worker's event loop is not held by either.
import { expect, setDefaultTimeout, test } from "bun:test";
import { bounded } from "../../src/stats/bounded.ts";

setDefaultTimeout(60_000);

test("at most maxInFlight requests are served at once; the rest are refused with 503 at once", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fetch = bounded(async () => (await gate, new Response("ok")), { maxInFlight: 2, timeoutMs: 60_000 });
  const held = [fetch(new Request("http://x/")), fetch(new Request("http://x/"))];
  const refused = await fetch(new Request("http://x/"));
  expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
  release();
  expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200]);
  expect((await fetch(new Request("http://x/"))).status).toBe(200); // the slots are free again
});

test("a handler that does not answer within the time limit gets 503, and its slot comes back", async () => {
  const fetch = bounded(() => new Promise<Response>(() => {}), { maxInFlight: 1, timeoutMs: 50 });
  const t0 = performance.now();
  expect((await fetch(new Request("http://x/"))).status).toBe(503);
  expect(performance.now() - t0).toBeLessThan(1_000);
  expect((await fetch(new Request("http://x/"))).status).toBe(503); // timed out again, not refused as busy
});
