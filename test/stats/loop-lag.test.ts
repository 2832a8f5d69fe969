import { expect, setDefaultTimeout, test } from "bun:test";
import { LoopLagMonitor } from "../../src/stats/loop-lag.ts";
import { waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

test("a blocked event loop shows as lag, and the worst of the window is kept", async () => {
  const m = new LoopLagMonitor(60_000);
  try {
    const until = performance.now() + 300;
    while (performance.now() < until); // the loop is blocked for 300 ms
    const worst = await waitFor(() => (m.worstMs >= 150 ? m.worstMs : undefined), 5000, "lag seen");
    expect(worst).toBeLessThan(2000);
    await waitFor(() => (m.worstMs === worst ? true : undefined), 5000, "kept"); // later ticks on time do not lower it
  } finally {
    m.stop();
  }
});
