// The two things provisioning fetches that the lockfile does not cover are pinned by hash: Bun's
// binary and the npm package librdkafka is built from. A mismatch is refused, not built or used.
import { expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const pin = (file: string, name: string) => new RegExp(`${name}="?([^"\\n]+)"?`).exec(readFileSync(`${ROOT}/${file}`, "utf8"))![1]!;

test("the bun that runs the suite is the pinned binary, and the Dockerfile pins the same one", async () => {
  const want = pin("scripts/lib/common.sh", "BUN_SHA256");
  expect(want).toMatch(/^[0-9a-f]{64}$/);
  const bin = realpathSync(Bun.which("bun")!);
  const got = new Bun.CryptoHasher("sha256").update(await Bun.file(bin).arrayBuffer()).digest("hex");
  expect(got).toBe(want);
  expect(readFileSync(`${ROOT}/Dockerfile`, "utf8")).toContain(`echo "${want}  `);
  // The package that carries it is checked before anything of it runs, here and in the image.
  const integrity = pin("scripts/lib/common.sh", "BUN_PACKAGE_INTEGRITY");
  expect(integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
  expect(readFileSync(`${ROOT}/Dockerfile`, "utf8")).toContain(`= "${integrity}"`);
  expect(readFileSync(`${ROOT}/Dockerfile`, "utf8")).not.toContain("npm install -g");
});

test("scripts/librdkafka/build.sh refuses a package whose integrity is not the pinned one, and builds nothing", () => {
  const dir = mkdtempSync(join(tmpdir(), "cdr-pin-"));
  cpSync(`${ROOT}/scripts/librdkafka`, dir, { recursive: true });
  const env = readFileSync(`${dir}/version.env`, "utf8").replace(/KAFKA_JS_INTEGRITY=\S+/, "KAFKA_JS_INTEGRITY=sha512-AAAA");
  writeFileSync(`${dir}/version.env`, env);
  const r = Bun.spawnSync(["bash", `${dir}/build.sh`, `${dir}/out`], { stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode).toBe(1);
  expect(r.stderr.toString()).toContain("version.env pins sha512-AAAA");
  expect(r.stderr.toString()).not.toContain("building librdkafka");
});
