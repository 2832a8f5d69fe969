/**
 * kill -9 at random moments: N records (realistic mix) into a fresh topic, the worker killed with
 * SIGKILL `kills` times at random progress points and restarted each time, then checked:
 *   valid records in ClickHouse (distinct cdr_id) = valid produced;
 *   invalid records in the DLQ, distinct by source partition/offset = invalid produced;
 * and what was delivered twice, counted with merges stopped and without FINAL: rows stored twice
 * (rows − distinct Kafka offsets) and envelopes twice (envelopes − distinct sources). With
 * DELIVERY=exactly-once (the default) both must be 0; DELIVERY=at-least-once shows what they are
 * without the replay check. CLICKHOUSE_URL picks the server (the 26.9 endpoint: http://127.0.0.1:8127).
 * Usage: bun scripts/chaos/kill-loop.ts [--records 500000] [--kills 20]   (services running)
 */
import { numberFlag, parseFlags, FLAG } from "../../src/cli/args.ts";
import { ddlStatements } from "../../src/clickhouse/migrate.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { dlqSources, prepareRun } from "../lib/harness.ts";

const args = parseFlags(process.argv.slice(2), { records: FLAG.value, kills: FLAG.value }, "kill-loop");
const N = numberFlag(args, "records", 500_000, 1000, 1e8);
const KILLS = numberFlag(args, "kills", 20, 0, 1000);
const run = await prepareRun("chaos", "chaos");
const { brokers, raw, dlq, table, ch } = run;
const exactlyOnce = (process.env.DELIVERY ?? "exactly-once") === "exactly-once";
// Replays must stay visible: a merge would collapse them behind the count's back. Without merges
// the parts of every small insert after a restart pile up; the table is made again with room for them.
// Its offsets table and view go too: a view made for the dropped table does not follow a new one.
for (const name of [`${table}_offsets_mv`, `${table}_offsets`, table]) await ch.command({ query: `DROP TABLE ${run.database}.${name}` });
for (const q of ddlStatements(run.database, table))
  await ch.command({ query: q.startsWith("CREATE TABLE") ? `${q} SETTINGS parts_to_throw_insert = 100000, parts_to_delay_insert = 100000` : q });
await ch.command({ query: `SYSTEM STOP MERGES ${run.database}.${table}` });
const stamp = table;

const gen = new SyntheticCdrs({ seed: 99, invalidShare: 0.03, idPrefix: `k${stamp}` });
const producer = new Producer({ "bootstrap.servers": brokers, "linger.ms": "20", "compression.type": "lz4" });
let valid = 0;
for (let sent = 0; sent < N; sent += 10_000) {
  const values = Array.from({ length: Math.min(10_000, N - sent) }, () => { const r = gen.next(); if (!r.defect) valid++; return r.text; });
  await producer.produceBatch(raw, values);
}
producer.close();
const invalid = N - valid;

// A killed member holds its partitions until its session times out (45 s by default): 6 s keeps 20 kills short.
// Under group.protocol=consumer (KAFKA_PROP_GROUP_PROTOCOL in the environment) the session is the
// broker's to set, and librdkafka refuses the member's own.
// One WORKER_INSTANCE across restarts, as a StatefulSet or a systemd unit gives it: the restarted
// worker's transactional.id fences the killed one and aborts the transaction it left open at once,
// where a new name would leave it to the coordinator's timeout (10 s), holding back every
// read_committed reader of the DLQ partition meanwhile.
const kip848 = process.env.KAFKA_PROP_GROUP_PROTOCOL === "consumer";
const start = () =>
  run.startWorker({
    extra: { LOG_LEVEL: "error", ...(kip848 ? {} : { KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" }), WORKER_INSTANCE: `chaos-${stamp}` },
  });
const rows = async () => {
  const rs = await ch.query({ query: `SELECT count() AS c, uniqExact(cdr_id) AS u, uniqExact(kafka_partition, kafka_offset) AS o FROM ${run.database}.${table}`, format: "JSONEachRow" });
  const [r] = await rs.json<{ c: string; u: string; o: string }>();
  return { count: Number(r!.c), distinct: Number(r!.u), offsets: Number(r!.o) };
};
// Kill points: random moments, sorted, spread over the run (by distinct rows in ClickHouse).
const points = Array.from({ length: KILLS }, () => Math.floor(Math.random() * valid * 0.95)).sort((a, b) => a - b);
/** How long the end of the run may take to settle before it is reported as it stands. */
const SETTLE_MS = 90_000;
const t0 = performance.now();
// The longest time no new row was stored while some were still to come: what a kill costs the
// stream (the killed member's session, the next owner's replay check, the restart).
let longestStallMs = 0, sampling = true;
const sampler = (async () => {
  let last = -1, grewAt = performance.now();
  while (sampling) {
    const d = (await rows()).distinct, now = performance.now();
    if (d > last) [last, grewAt] = [d, now];
    else if (d < valid) longestStallMs = Math.max(longestStallMs, now - grewAt);
    await Bun.sleep(100);
  }
})();
let worker = await start();
for (const [i, at] of points.entries()) {
  while ((await rows()).distinct < at) await Bun.sleep(20 + Math.random() * 80);
  worker.kill("SIGKILL");
  await worker.exited;
  console.error(`kill ${i + 1}/${KILLS} at ~${at} distinct rows`);
  worker = await start();
}
// Every valid row stored, then the DLQ side done too: every partition committed to its end (an
// envelope's record is committed only once its transaction has ended), then a clean stop. Each wait
// is bounded: a run that never gets there stops anyway and reports what is missing, with the
// worker's partitions as it last saw them.
const settled = async (what: string, done: () => Promise<boolean>) => {
  for (const end = performance.now() + SETTLE_MS; !(await done()); await Bun.sleep(200)) {
    if (performance.now() < end) continue;
    const parts = (await run.stats().catch(() => null))?.partitions;
    console.error(`not ${what} after ${SETTLE_MS / 1000} s; the worker's partitions: ${JSON.stringify(parts)}`);
    return;
  }
};
await settled("every valid row stored", async () => (await rows()).distinct >= valid);
sampling = false;
await sampler;
await settled("every partition committed to its end", () => run.committedToEnd().catch(() => false));
worker.kill("SIGTERM");
const exitCode = await worker.exited;
const seconds = (performance.now() - t0) / 1000;

// The DLQ, distinct by source partition/offset.
const { messages: high, sources } = await dlqSources(brokers, dlq, `chaos-reader-${stamp}`);
const final = await rows();
// The audit's own count over every partition up to the group's commits.
const audited = Bun.spawnSync(["bun", `${import.meta.dir}/../../src/main.ts`, "audit"], { env: { ...run.env(), LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
const audit = JSON.parse(`${audited.stdout}`.trim().split("\n").at(-1) || "null") as Record<string, unknown> | null;
const report = {
  records: N, kills: KILLS, seconds: Math.round(seconds), longest_stall_s: +(longestStallMs / 1000).toFixed(1), worker_exit_code: exitCode,
  delivery: exactlyOnce ? "exactly-once" : "at-least-once",
  protocol: kip848 ? "consumer" : (process.env.KAFKA_PROP_PARTITION_ASSIGNMENT_STRATEGY ?? "classic"), clickhouse: process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123",
  valid_produced: valid, valid_in_clickhouse_distinct: final.distinct, rows_inserted: final.count,
  rows_twice: final.count - final.offsets, duplicate_rate: +((final.count - final.distinct) / valid).toFixed(4),
  invalid_produced: invalid, invalid_in_dlq_distinct: sources.size, dlq_messages: high, envelopes_twice: high - sources.size,
  lost: valid - final.distinct + (invalid - sources.size),
  audit: audit ? { exit_code: audited.exitCode, ...audit } : `exit ${audited.exitCode}: ${`${audited.stderr}`.slice(-300)}`,
  ok: final.distinct === valid && sources.size === invalid && (!exactlyOnce || (final.count === final.offsets && high === sources.size && audited.exitCode === 0)),
};
console.log(JSON.stringify(report));
await run.cleanup();
process.exit(report.ok ? 0 : 1);
