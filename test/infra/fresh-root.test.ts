// The test command on a machine that has nothing: scripts/fresh-root-check.sh provisions a bare
// Debian 12 root made by mmdebstrap and runs the provisioning test inside it, so a package installed
// by hand on this machine (the CNI dnsname plugin was one) cannot hide behind a green run here.
import { expect, setDefaultTimeout, test } from "bun:test";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("a bare Debian 12 root has everything the tests need after scripts/provision.sh", async () => {
  const proc = Bun.spawn(["bash", `${ROOT}/scripts/fresh-root-check.sh`], { stdout: "pipe", stderr: "pipe" });
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  console.log(err.split("\n").filter((l) => l.startsWith("[fresh-root-check.sh]")).join("\n"));
  expect(err).toContain("a bare Debian 12 root has everything the tests need after provisioning");
  expect(code).toBe(0);
}, 900_000);
