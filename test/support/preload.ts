// `bun test` on its own (package.json's test script) runs the suite as scripts/test.sh does: this
// preload (bunfig.toml) provisions what is missing and starts the local services before the first
// file, and each test file sets test.sh's per-test timeout itself (setDefaultTimeout: bun has no
// global default). scripts/test.sh has done both already and says so with CDR_TEST_SERVICES_UP.
import { spawnSync } from "node:child_process";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

if (!process.env.CDR_TEST_SERVICES_UP) {
  for (const step of [["scripts/provision.sh"], ["scripts/services.sh", "start"]]) {
    const r = spawnSync("bash", [`${ROOT}/${step[0]}`, ...step.slice(1)], { cwd: ROOT, stdio: "inherit" });
    if (r.status !== 0) throw new Error(`bash ${step.join(" ")} exited ${r.status}: the tests need provisioned, running services`);
  }
  process.env.CDR_TEST_SERVICES_UP = "1";
}
