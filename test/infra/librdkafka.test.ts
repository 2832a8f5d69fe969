// librdkafka is the project's own build of the pinned version (scripts/librdkafka/): provisioning
// made it, a second build does nothing, and the worker loads exactly it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { createTopic, deleteTopics, props } from "../support/kafka.ts";
import { KAFKA_BROKERS, ROOT, uniqueName } from "../support/services.ts";

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

// The replay check asks through the admin API (librdkafka 2.3 and later). A library named by
// LIBRDKAFKA_PATH that lacks it must still load, and the check must get the same answers from the
// blocking calls it falls back to.
test("with an older library (LIBRDKAFKA_PATH, Debian's 2.0.2) the replay check's lookups fall back to blocking calls and answer the same", async () => {
  const topic = await createTopic("lookup-old", 2);
  try {
    const p = new Producer(props);
    for (let i = 0; i < 4; i++) await p.produce(topic, `r${i}`, { partition: i % 2 });
    p.close();
    const group = uniqueName("lookup-old-group");
    const c = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
    await c.commit([{ topic, partition: 1, offset: 1n, metadata: '{"cdr_worker":1,"since":5}' }]);
    await c.close();
    const probe = (env: Record<string, string>) => {
      const r = Bun.spawnSync(["bun", `${ROOT}/test/support/lookup-probe.ts`, KAFKA_BROKERS, topic, group, "0"], {
        stdout: "pipe",
        stderr: "pipe",
        env: { PATH: process.env.PATH!, ...env },
      });
      expect(r.exitCode).toBe(0);
      return JSON.parse(r.stdout.toString().trim().split("\n").at(-1)!) as Record<string, unknown>;
    };
    const pinnedAnswers = probe({});
    const old = probe({ LIBRDKAFKA_PATH: "/usr/lib/x86_64-linux-gnu/librdkafka.so.1" });
    expect([pinnedAnswers.version, pinnedAnswers.admin_api]).toEqual([pinned, true]);
    expect([String(old.version).startsWith("2.0."), old.admin_api]).toEqual([true, false]);
    const answers = (o: Record<string, unknown>) => ({ ...o, version: undefined, admin_api: undefined });
    expect(answers(old)).toEqual(answers(pinnedAnswers));
    expect(pinnedAnswers.committed).toEqual([[0, "-1001", null, 0], [1, "1", '{"cdr_worker":1,"since":5}', 0]]);
    expect([pinnedAnswers.earliest, pinnedAnswers.latest, pinnedAnswers.by_time, pinnedAnswers.partitions]).toEqual([
      [[0, 0], [1, 0]], [[0, 2], [1, 2]], [[0, 0], [1, 0]], 2,
    ]);
  } finally {
    await deleteTopics(topic);
  }
});
