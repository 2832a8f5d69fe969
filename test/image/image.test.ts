// What the distroless image holds is enough: every shared library the binary and the embedded
// librdkafka need is in the base image or in the copy list, and the binary runs in a root
// filesystem that holds only those files (no Bun, no node_modules, no librdkafka1 package).
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { headOf } from "../../src/version.ts";
import { deleteTopics } from "../support/kafka.ts";
import { CLICKHOUSE_URL, KAFKA_BROKERS, ROOT, run } from "../support/services.ts";

setDefaultTimeout(60_000);

const BIN = `${ROOT}/.local/image-test/cdr-worker`;
const LIBDIR = "/usr/lib/x86_64-linux-gnu";
const list = (f: string) => readFileSync(`${ROOT}/scripts/image/${f}`, "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
const base = list("distroless-cc-debian12.txt");
const copied = list("copy-libs.txt");

async function needed(file: string): Promise<string[]> {
  const out = await run(["ldd", file]);
  return out.split("\n").map((l) => l.trim().split(/\s+/)[0]!).filter((n) => n && n !== "linux-vdso.so.1").map((n) => n.split("/").pop()!);
}

beforeAll(async () => {
  await run(["bun", `${ROOT}/scripts/build.ts`, "--outfile", BIN]);
}, 120_000);

test("every library the binary and the embedded librdkafka link to is in distroless/cc or the copy list", async () => {
  const deps = new Set([...(await needed(BIN)), ...(await needed(`${ROOT}/.local/build/librdkafka.so.1`))]);
  const missing = [...deps].filter((d) => !base.includes(d) && !copied.includes(d));
  expect(missing).toEqual([]);
  expect(copied.every((c) => deps.has(c))).toBe(true); // nothing copied without need
});

test("the binary runs as the non-root user in a root filesystem of only itself and those libraries", async () => {
  const rootfs = `${ROOT}/.local/image-test/rootfs`;
  rmSync(rootfs, { recursive: true, force: true });
  for (const d of ["usr/local/bin", `usr/lib/x86_64-linux-gnu`, "lib64", "tmp", "proc", "etc"]) mkdirSync(`${rootfs}/${d}`, { recursive: true });
  cpSync(BIN, `${rootfs}/usr/local/bin/cdr-worker`);
  for (const lib of [...base, ...copied]) if (existsSync(`${LIBDIR}/${lib}`)) cpSync(`${LIBDIR}/${lib}`, `${rootfs}/usr/lib/x86_64-linux-gnu/${lib}`, { dereference: true });
  cpSync(`${LIBDIR}/ld-linux-x86-64.so.2`, `${rootfs}/lib64/ld-linux-x86-64.so.2`, { dereference: true });
  chmodSync(`${rootfs}/tmp`, 0o1777); // distroless's /tmp: the embedded librdkafka is unpacked there
  await Bun.write(`${rootfs}/etc/passwd`, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n");
  await run(["mount", "-t", "proc", "proc", `${rootfs}/proc`]);
  try {
    const env = ["env", "-i", `KAFKA_BROKERS=${KAFKA_BROKERS}`, "/usr/sbin/chroot", "--userspec=65532:65532", rootfs, "/usr/local/bin/cdr-worker"];
    // The embedded library is the pinned build (scripts/librdkafka/version.env).
    const pinned = /LIBRDKAFKA_VERSION=(\S+)/.exec(readFileSync(`${ROOT}/scripts/librdkafka/version.env`, "utf8"))![1]!;
    // …and the commit it was built from, which the image build passes in (its context has no .git).
    const version = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")).version;
    expect((await run([...env, "version"])).trim()).toBe(`${version} (commit ${headOf(ROOT)}) librdkafka ${pinned}`);
    // A real librdkafka call from inside: the embedded copy loads and talks to the broker.
    const out = await run([...env, "topics", "describe"]);
    expect(out).toContain('"topic":"cdr.raw"');
    // `run` compiles the consumer's batch copy with Bun's TinyCC at start and opens the consumer's
    // wake-up pipe: both must work here too (no compiler, no headers, only /tmp writable).
    const table = `image_${Date.now().toString(36)}`;
    const topics = [`${table}.raw`, `${table}.dlq`];
    const runEnv = [
      ...env.slice(0, 2), `CLICKHOUSE_URL=${CLICKHOUSE_URL}`, "CLICKHOUSE_DATABASE=e2e", `CLICKHOUSE_TABLE=${table}`,
      `KAFKA_TOPIC_RAW=${topics[0]}`, `KAFKA_TOPIC_DLQ=${topics[1]}`, `KAFKA_GROUP_ID=image-${table}`, "STATS_PORT=0",
      "DLQ_PROVENANCE_KEY=image-test-provenance-key-0123456789abcdef", ...env.slice(2),
    ];
    await run([...runEnv, "topics", "ensure"]);
    await run([...runEnv, "migrate"]);
    const worker = Bun.spawn([...runEnv, "run"], { stdout: "ignore", stderr: "pipe" });
    let logs = "";
    for await (const chunk of worker.stderr) {
      logs += new TextDecoder().decode(chunk);
      if (logs.includes("cdr-worker running") || logs.includes("native batch copy unavailable")) break;
    }
    worker.kill("SIGTERM");
    const code = await worker.exited;
    if (code !== 0) console.error(logs);
    expect(code).toBe(0);
    expect(logs).toContain("cdr-worker running");
    expect(logs).not.toContain("native batch copy unavailable");
    // Nor may the consumer's wake-up pipe fall back to timers there.
    expect(logs).not.toContain("no wake-up pipe");
    for (const name of [`${table}_offsets_mv`, `${table}_offsets`, table])
      await run(["curl", "-fsS", `${CLICKHOUSE_URL}/`, "--data-binary", `DROP TABLE IF EXISTS e2e.${name}`]);
    await deleteTopics(...topics);
  } finally {
    await run(["umount", `${rootfs}/proc`]);
  }
}, 60_000);
