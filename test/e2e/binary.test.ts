// The compiled binary (not `bun run src/…`) end to end against the real services.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clickhouse, KAFKA_BROKERS, CLICKHOUSE_URL, ROOT, run, uniqueName } from "../support/services.ts";
import { committedCount, deleteTopics } from "../support/kafka.ts";
import { startWorker, statsWhen, killLeftoverWorkers } from "../support/worker.ts";
import { headOf, VERSION } from "../../src/version.ts";

setDefaultTimeout(60_000);

const BIN = `${ROOT}/.local/e2e-binary/cdr-worker`;
const ch = clickhouse();
const n = { raw: uniqueName("bin.raw"), dlq: uniqueName("bin.dlq"), group: uniqueName("bin-g"), table: uniqueName("bin").replace(/\W/g, "_") };
const env = {
  PATH: process.env.PATH!, KAFKA_BROKERS, CLICKHOUSE_URL, KAFKA_TOPIC_RAW: n.raw, KAFKA_TOPIC_DLQ: n.dlq, KAFKA_GROUP_ID: n.group,
  CLICKHOUSE_DATABASE: "e2e", CLICKHOUSE_TABLE: n.table, STATS_HOST: "127.0.0.1", STATS_PORT: "0", BATCH_FLUSH_INTERVAL_SECONDS: "0.2",
  // The binary must not need Debian's librdkafka: point the override nowhere, so only the embedded copy can load.
  LIBRDKAFKA_PATH: "/nonexistent/librdkafka.so.1",
  DLQ_PROVENANCE_KEY: "binary-test-provenance-key-0123456789abcdef",
};
const bin = async (...args: string[]) => {
  const proc = Bun.spawn([BIN, ...args], { env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`cdr-worker ${args.join(" ")} exited ${code}: ${err}`);
  return out;
};

beforeAll(async () => {
  await run(["bun", `${ROOT}/scripts/build.ts`, "--outfile", BIN]);
}, 120_000);
afterAll(async () => {
  killLeftoverWorkers();
  await deleteTopics(n.raw, n.dlq).catch(() => {});
  for (const name of [`${n.table}_offsets_mv`, `${n.table}_offsets`, n.table])
    await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
  await ch.close();
});

test("topics ensure, migrate, generate, run, SIGTERM: exit 0 with rows and DLQ counts as generated", async () => {
  const ensured = (await bin("topics", "ensure")).trim().split("\n").map((l) => JSON.parse(l));
  expect(ensured.map((r) => r.action)).toEqual(["created", "created"]);
  expect(JSON.parse(await bin("migrate"))).toEqual({ migrated: `e2e.${n.table}`, columns_added: [] });
  const summary = JSON.parse(await bin("generate", "--count", "5000", "--invalid-share", "0.1", "--seed", "7"));
  expect(summary.sent).toBe(5000);
  const invalid = Object.values(summary.invalid as Record<string, number>).reduce((a, b) => a + b, 0);
  expect(summary.valid + invalid).toBe(5000);
  const w = await startWorker(env, [BIN, "run"]);
  const s = await statsWhen(w, (s) => s.total_processed === 5000, 60_000, "all processed");
  expect(s.total_dlq).toBe(invalid);
  expect(await w.stop("SIGTERM")).toBe(0);
  // The batch copy is compiled at start by the TinyCC inside the binary; it must not fall back.
  expect(w.logs.filter((l) => l.includes("native batch copy unavailable"))).toEqual([]);
  const rs = await ch.query({ query: `SELECT count() AS c, uniqExact(cdr_id) AS ids FROM e2e.${n.table}`, format: "JSONEachRow" });
  const [counted] = await rs.json<{ c: string; ids: string }>();
  expect([Number(counted!.c), Number(counted!.ids)]).toEqual([summary.valid, summary.valid]);
  expect((await committedCount(n.dlq))).toBe(invalid);
}, 120_000);

// Bun would write the embedded librdkafka to $TMPDIR/.bun-0-<wyhash of its bytes>.so, a name anyone
// can compute, open it without O_EXCL and leave it: a local user who made it first would own the
// library the worker loads. The binary writes its own copy into a fresh private directory instead.
test("regression: a file planted at Bun's name for the embedded library is neither loaded nor overwritten, and nothing is left in TMPDIR after a run and an audit", async () => {
  const tmp = mkdtempSync(join(tmpdir(), "cdr-planted-"));
  const planted = join(tmp, `.bun-0-${Bun.hash(readFileSync(`${ROOT}/.local/librdkafka/lib/librdkafka.so.1`)).toString(16)}.so`);
  writeFileSync(planted, "not a library", { mode: 0o444 });
  // Besides the planted file, only Bun's TinyCC header directory (bun-cc-0: stdarg.h and the like,
  // which the batch copy's C source does not include; Bun reads TMPDIR once, at start, so the worker
  // cannot move it) may be there.
  const ours = () => readdirSync(tmp).filter((f) => f !== "bun-cc-0");
  const only = [planted.slice(tmp.length + 1)];
  const inTmp = { ...env, TMPDIR: tmp };
  const version = Bun.spawnSync([BIN, "version"], { env: inTmp, stdout: "pipe", stderr: "pipe" });
  expect(`${version.exitCode} ${version.stdout.toString().trim()}`).toBe(`0 ${VERSION} (commit ${headOf(ROOT)}) librdkafka 2.15.1`);
  const w = await startWorker(inTmp, [BIN, "run"]);
  // While it runs, no copy of the library is left to replace or read.
  expect(ours()).toEqual(only);
  expect(await w.stop("SIGTERM")).toBe(0);
  const audit = Bun.spawnSync([BIN, "audit"], { env: inTmp, stdout: "pipe", stderr: "pipe" });
  expect(audit.exitCode).toBe(0);
  expect(ours()).toEqual(only);
  expect(readFileSync(planted, "utf8")).toBe("not a library");
}, 120_000);
