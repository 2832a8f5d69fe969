// librdkafka's fetch responses and decompressed batches are malloc'd blocks of up to 16 MiB. With
// glibc's moving threshold the second such block comes from the heap and stays resident once
// freed; the worker sets the threshold at start (largeBlocksMapped), so each goes back at free.
import { expect, setDefaultTimeout, test } from "bun:test";

setDefaultTimeout(60_000);

const MiB = 1024 * 1024;

async function retainedAfterFree(mode: "mapped" | "glibc-default"): Promise<number> {
  const proc = Bun.spawn(["bun", `${import.meta.dir}/../support/large-blocks-probe.ts`, mode], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(err).toBe("");
  expect(code).toBe(0);
  return Number(out.trim());
}

test("a 16 MiB block freed goes back to the kernel with the worker's threshold; glibc's own keeps it resident", async () => {
  expect(await retainedAfterFree("glibc-default")).toBeGreaterThan(12 * MiB);
  expect(await retainedAfterFree("mapped")).toBeLessThan(2 * MiB);
});
