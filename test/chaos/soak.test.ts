// The short variant of scripts/soak.ts: a steady stream for 15 s, nothing lost, memory bounded.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("soak (short): 15 s at 2000 records/s, nothing lost, buffer bounded, clean exit", async () => {
  const proc = Bun.spawn(["bun", `${ROOT}/scripts/soak.ts`, "--seconds", "15", "--rate", "2000"], { stdout: "pipe", stderr: "inherit" });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  const report = JSON.parse(out.trim().split("\n").at(-1)!);
  expect(code).toBe(0);
  expect(report.lost).toBe(0);
  expect(report.produced).toBeGreaterThanOrEqual(25_000);
  expect(report.worker_exit_code).toBe(0);
  expect(report.buffered_rows_max).toBeLessThanOrEqual(3000);
  expect(report.rss_mib.max).toBeLessThan(250);
}, 120_000);
