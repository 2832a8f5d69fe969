// librdkafka is the project's own build of the pinned version (scripts/librdkafka/): provisioning
// made it, a second build does nothing, and the worker loads exactly it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const pinned = /LIBRDKAFKA_VERSION=(\S+)/.exec(readFileSync(`${ROOT}/scripts/librdkafka/version.env`, "utf8"))![1]!;

test("the build is cached by version: a second run says ok and builds nothing", () => {
  const r = Bun.spawnSync(["bash", `${ROOT}/scripts/librdkafka/build.sh`, `${ROOT}/.local/librdkafka`], { stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  expect(r.stderr.toString()).toContain(`ok: librdkafka ${pinned}`);
});

test("the worker loads the pinned build, and LIBRDKAFKA_PATH still overrides it", () => {
  const version = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "version"], { stdout: "pipe", env: { PATH: process.env.PATH! } });
  expect(version.stdout.toString().trim()).toEndWith(`librdkafka ${pinned}`);
  const debian = "/usr/lib/x86_64-linux-gnu/librdkafka.so.1"; // kcat's (Debian's 2.0.2)
  const other = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "version"], { stdout: "pipe", env: { PATH: process.env.PATH!, LIBRDKAFKA_PATH: debian } });
  expect(other.stdout.toString().trim()).toMatch(/librdkafka 2\.0\.\d+$/);
});
