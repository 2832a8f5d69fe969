// The README's first command as a person uses it: `bash scripts/run.sh` at a terminal, then Ctrl-C,
// which the terminal sends to the whole foreground process group. The worker must stop cleanly
// (flush, commit, exit 0), not take the group's SIGINT and run.sh's forwarded one as two signals.
import { expect, setDefaultTimeout, test } from "bun:test";
import { deleteTopics } from "../support/kafka.ts";
import { clickhouse, ROOT, uniqueName, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

test("Ctrl-C stops `bash scripts/run.sh` cleanly: the worker gets one SIGINT, flushes, commits and exits 0", async () => {
  const table = uniqueName("runsh").replace(/\W/g, "_");
  const [raw, dlq] = [uniqueName("runsh.raw"), uniqueName("runsh.dlq")];
  // setsid: run.sh leads its own process group, as a shell's foreground job does.
  const proc = Bun.spawn(["setsid", "bash", `${ROOT}/scripts/run.sh`], {
    env: {
      ...process.env, DEMO_RECORDS: "300", STATS_PORT: String(19_100 + Math.floor(Math.random() * 100)),
      KAFKA_TOPIC_RAW: raw, KAFKA_TOPIC_DLQ: dlq, KAFKA_GROUP_ID: uniqueName("runsh-g"),
      CLICKHOUSE_DATABASE: "e2e", CLICKHOUSE_TABLE: table,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  const collect = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) output += new TextDecoder().decode(chunk);
  };
  const reading = Promise.all([collect(proc.stdout), collect(proc.stderr)]);
  await waitFor(() => (output.includes("the worker keeps running") ? true : proc.exitCode !== null ? true : undefined), 240_000, "run.sh's demo done");
  expect(proc.exitCode).toBeNull();
  process.kill(-proc.pid, "SIGINT"); // what a terminal's Ctrl-C does
  await proc.exited;
  await reading;
  expect(output).toContain('"msg":"stopped cleanly"');
  expect(output).not.toContain("second signal");
  const ch = clickhouse();
  for (const name of [`${table}_offsets_mv`, `${table}_offsets`, table]) await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` });
  await ch.close();
  await deleteTopics(raw, dlq);
}, 300_000);
