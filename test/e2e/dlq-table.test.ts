// The DLQ table against the real broker and ClickHouse 18.16: `dlq fill` stores one row per
// committed DLQ record across kill -9, a ClickHouse cut and lost answers, never an aborted
// transaction's envelope; `dlq replay --where` replays exactly the offsets the table selects.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdirSync } from "node:fs";
import { encodeEnvelope } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { Transactions } from "../../src/kafka/transaction.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { committedThrough, consumeN, createTopic, deleteTopics, props, readCommitted, text, topicLength } from "../support/kafka.ts";
import { e2eScope } from "../support/e2e.ts";
import { ROOT, uniqueName, waitFor } from "../support/services.ts";
import { GROUP_PROTOCOLS } from "../support/protocols.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { explainedBy, startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

const RECORDS = 1500;

/** Raw records of which two in three are refused: a bad rat, or malformed JSON naming its device. */
function rawRecords(prefix: string): string[] {
  return Array.from({ length: RECORDS }, (_, i) => {
    if (i % 3 === 0) return toJson(withFields({ raw_id: `${prefix}-${i}`, rat: 7, device_id: `dev-${i % 5}` }));
    if (i % 3 === 1) return `{"raw_id":"${prefix}-${i}","device_id":"dev-${i % 7}","caller_num":"+447700900123", oops`;
    return toJson(withFields({ raw_id: `${prefix}-${i}` }));
  });
}

/** The worker dead-letters the refused records (exactly-once: in transactions), then stops. */
async function deadLettered(n: Names, env: Record<string, string>): Promise<void> {
  const p = new Producer(props);
  await p.produceBatch(n.raw, rawRecords(n.table));
  p.close();
  const w = await startWorker(env);
  await committedThrough(n.group, n.raw, 3, RECORDS);
  expect(await w.stop()).toBe(0);
}

let fills = 0;
const fillers: Subprocess[] = [];
// A test that fails leaves no filler running behind it.
afterAll(() => {
  for (const f of fillers) f.kill("SIGKILL");
});
/** A filler, its log lines kept in a file of its own (read back when a test fails). */
function fill(env: Record<string, string>): Subprocess<"ignore", number, number> & { logFile: string } {
  mkdirSync(`${ROOT}/.local/tmp`, { recursive: true });
  const logFile = `${ROOT}/.local/tmp/dlq-fill-${process.pid}-${++fills}.log`;
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "fill"], { env, stdout: Bun.file(logFile), stderr: Bun.file(logFile) });
  fillers.push(proc);
  return Object.assign(proc, { logFile });
}

async function tableCounts(n: Names): Promise<{ rows: number; offsets: number }> {
  const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${n.database}.${n.table}_dlq`;
  const [r] = await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
  return { rows: Number(r!.rows), offsets: Number(r!.offsets) };
}

async function tableOffsets(n: Names, where = "1"): Promise<string[]> {
  const q = `SELECT dlq_partition, dlq_offset FROM ${n.database}.${n.table}_dlq WHERE ${where} ORDER BY dlq_partition, dlq_offset`;
  return (await (await ch.query({ query: q, format: "TabSeparated" })).text()).split("\n").filter(Boolean);
}

test("dlq fill: one row per committed DLQ record across kill -9, a ClickHouse outage and lost answers; no aborted envelope", async () => {
  const n = await names("dlq-fill");
  const proxy = TcpProxy.inFrontOf(n.clickhouseUrl);
  // Inserts of 40 rows, never more: every round kills the filler a few inserts in, a backlog too.
  const env = workerEnv(n, { BATCH_SIZE: "40", BATCH_BACKLOG_ROWS: "40", BATCH_FLUSH_INTERVAL_SECONDS: "0.05" });
  await deadLettered(n, env);
  // What a read_committed reader never sees: an aborted transaction's envelopes; what it must count
  // though no envelope: records anyone may write to the DLQ.
  const txp = new Producer({ ...props, "transactional.id": uniqueName("dlq-aborted") });
  const tx = new Transactions(txp);
  await tx.init(10_000);
  tx.begin();
  const aborted = encodeEnvelope({ reason: "malformed_json", field: null, payload: "aborted", payloadIsObject: false }, new Date(), "w");
  for (let i = 0; i < 5; i++) await tx.produce(n.dlq, aborted);
  await tx.abort(10_000);
  txp.close();
  const plain = new Producer(props);
  await plain.produceBatch(n.dlq, ["not json", "{}"]);

  // A killed member holds its partition until its session ends: a short one keeps the rounds short.
  const fillEnv = { ...env, CLICKHOUSE_URL: proxy.url, KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" };
  // Every third insert's answer is lost after ClickHouse stored it.
  proxy.loseAnswers((i) => (i % 3 === 1 ? "reset" : null));
  const OUTAGE_RECORDS = 300;
  let kills = 0;
  const runs: Array<ReturnType<typeof fill>> = [];
  for (let round = 0; round < 5; round++) {
    const f = fill(fillEnv);
    runs.push(f);
    if (round === 2) {
      // ClickHouse gone for the worker and the filler alike: the worker's batches of valid records
      // exhaust their retries into the DLQ (clickhouse-failed); the filler's inserts fail and wait.
      const w = await startWorker({ ...env, CLICKHOUSE_URL: proxy.url, CLICKHOUSE_REQUEST_TIMEOUT_MS: "1000", CH_RETRY_MAX_ATTEMPTS: "2", CH_RETRY_INITIAL_DELAY_MS: "100", DLQ_STORAGE_FAILURE_REASON: "ch_insert_failed" });
      // Ready: its partitions assigned and their replay checks done, before ClickHouse goes.
      // Ready on every partition: one record each stored while ClickHouse answers (its replay check done).
      for (let i = 0; i < 3; i++) await plain.produce(n.raw, toJson(withFields({ raw_id: `${n.table}-up-${i}` })), { partition: i });
      await statsWhen(w, (s) => s.total_clickhouse === 3, 30_000, "a record stored on each partition");
      proxy.down();
      await plain.produceBatch(n.raw, Array.from({ length: OUTAGE_RECORDS }, (_, i) => toJson(withFields({ raw_id: `${n.table}-down-${i}` }))));
      await explainedBy(w, () => committedThrough(n.group, n.raw, 3, RECORDS + 3 + OUTAGE_RECORDS));
      expect(await w.stop()).toBe(0);
      await Bun.sleep(500);
      f.kill("SIGKILL"); // killed while it waits for ClickHouse
      await f.exited;
      kills++;
      proxy.up();
      continue;
    }
    // Killed once it has made a few inserts (a lost answer among them, checked and resent), at a
    // moment of its own each round.
    const before = (await tableCounts(n)).rows;
    await waitFor(async () => ((await tableCounts(n)).rows >= before + 120 ? true : undefined), 30_000, `rows past ${before + 120}`);
    await Bun.sleep((round * 97) % 250);
    f.kill("SIGKILL");
    await f.exited;
    kills++;
  }
  plain.close();
  const committed = await readCommitted(n.dlq);
  expect(committed.length).toBe(2 * (RECORDS / 3) + 2 + OUTAGE_RECORDS);
  const want = committed.map((m) => `${m.partition}\t${m.offset}`).sort();
  proxy.loseAnswers(() => null);
  const last = fill(fillEnv);
  runs.push(last);
  await waitFor(async () => ((await tableCounts(n)).rows >= want.length ? true : undefined), 60_000, "every record stored");
  last.kill("SIGTERM");
  expect(await last.exited).toBe(0);
  // Every insert that failed was tried again: nothing logged at error level by any run.
  const logs = await Promise.all(runs.map((f) => Bun.file(f.logFile).text()));
  expect(logs.join("").split("\n").filter((l) => l.includes('"level":"error"'))).toEqual([]);
  expect(kills).toBe(5);
  expect(proxy.lost.reset).toBeGreaterThan(0);
  // As billing counts: count() without FINAL beside the distinct (partition, offset), and exactly the topic's.
  expect(await tableCounts(n)).toEqual({ rows: want.length, offsets: want.length });
  expect((await tableOffsets(n)).sort()).toEqual(want);
  const q = `SELECT failure_reason, stage, count() AS c, countIf(payload_sha256 != '') AS digests FROM ${n.database}.${n.table}_dlq GROUP BY failure_reason, stage ORDER BY failure_reason`;
  expect(await (await ch.query({ query: q, format: "JSONEachRow" })).json()).toEqual([
    { failure_reason: "", stage: "", c: "2", digests: "2" },
    { failure_reason: "ch_insert_failed", stage: "clickhouse-failed", c: String(OUTAGE_RECORDS), digests: String(OUTAGE_RECORDS) },
    { failure_reason: "invalid_rat_value", stage: "decode", c: String(RECORDS / 3), digests: String(RECORDS / 3) },
    { failure_reason: "malformed_json", stage: "decode", c: String(RECORDS / 3), digests: String(RECORDS / 3) },
  ]);
  const lenient = `SELECT uniqExact(device_id) AS devices, any(caller_prefix) AS prefix, countIf(cdr_id IS NULL) AS no_id FROM ${n.database}.${n.table}_dlq WHERE failure_reason = 'malformed_json'`;
  expect(await (await ch.query({ query: lenient, format: "JSONEachRow" })).json()).toEqual([{ devices: "7", prefix: "+44", no_id: "0" }]);
  proxy.down();
  // audit counts the topic's committed records against the table's rows: clean, then a row stored twice.
  const audit = () => {
    const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "audit"], { env: { ...env, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
    const line = `${p.stdout}`.split("\n").find((l) => l.includes('"dlq_table"'));
    const summary = `${p.stdout}`.split("\n").find((l) => l.startsWith('{"audit"'));
    return { code: p.exitCode, table: line ? JSON.parse(line) : null, summary: summary ? JSON.parse(summary) : null };
  };
  expect(audit()).toMatchObject({ code: 0, table: { envelopes: want.length, rows: want.length, missing: 0, stored_twice: 0, not_in_topic: 0 }, summary: { audit: "clean", dlq_table_findings: 0 } });
  // A row the table holds (offsets of transaction markers hold none), copied once.
  const copied = (await tableOffsets(n))[3]!.split("\t")[1]!;
  await ch.command({ query: `INSERT INTO ${n.database}.${n.table}_dlq SELECT * FROM ${n.database}.${n.table}_dlq WHERE dlq_offset = ${copied}` });
  expect(audit()).toMatchObject({ code: 1, table: { rows: want.length + 1, stored_twice: 1, first: { stored_twice: [`0:${copied}`] } }, summary: { audit: "failed", dlq_table_findings: 1 } });
}, 180_000);

test("dlq replay --where replays exactly the offsets the DLQ table selects; a predicate that is not one is refused before any SQL", async () => {
  const n = await names("dlq-where");
  const env = workerEnv(n);
  await deadLettered(n, env);
  const f = fill(env);
  const total = 2 * (RECORDS / 3);
  await waitFor(async () => ((await tableCounts(n)).rows >= total ? true : undefined), 30_000, "table filled");
  // Its stats: what it stored and where each partition stands; /healthz while its loop runs.
  const running = (await Bun.file(f.logFile).text()).split("\n").find((l) => l.includes("dlq fill running"))!;
  const statsUrl = JSON.parse(running).stats as string;
  const stats = (await fetch(statsUrl).then((r) => r.json())) as { next_offsets: Record<string, number> };
  expect(stats).toMatchObject({ stored: total, lostAnswers: 0, buffered_bytes: 0 });
  // Past the last envelope (and the transaction markers among the offsets).
  expect(stats.next_offsets["0"]).toBeGreaterThan(total - 1);
  expect((await fetch(statsUrl.replace("/internal/stats", "/healthz"))).status).toBe(200);
  f.kill("SIGTERM");
  expect(await f.exited).toBe(0);
  // The same table, a DLQ topic made anew (offsets from 0 again): the filler refuses, naming why.
  const anew = await createTopic("dlq-anew");
  const p = new Producer(props);
  await p.produceBatch(anew, ["{}", "{}", "{}"]);
  p.close();
  const refused = fill({ ...env, KAFKA_TOPIC_DLQ: anew });
  expect(await refused.exited).toBe(1);
  expect(await Bun.file(refused.logFile).text()).toContain("was the topic made anew?");
  expect((await tableCounts(n)).rows).toBe(total);
  await deleteTopics(anew);
  const cli = async (...args: string[]) => {
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "replay", "--unverified", ...args], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { out, err, code };
  };
  const where = "failure_reason = 'invalid_rat_value' AND (device_id IN ('dev-1', 'dev-3') OR NOT dlq_offset >= 100)";
  const sql = "failure_reason = 'invalid_rat_value' AND (device_id IN ('dev-1', 'dev-3') OR NOT dlq_offset >= 100)";
  const selected = await tableOffsets(n, sql);
  expect(selected.length).toBeGreaterThan(50);
  expect(selected.length).toBeLessThan(RECORDS / 3);
  const dry = await cli("--where", where, "--dry-run");
  expect(dry.code).toBe(0);
  const listed = JSON.parse(dry.out).records.map((r: { dlq_partition: number; dlq_offset: number }) => `${r.dlq_partition}\t${r.dlq_offset}`);
  expect(listed).toEqual(selected);
  // Stopped at a limit, then resumed from where it says: every selected envelope sent once.
  const first = await cli("--where", where, "--limit", "7", "--chunk-size", "3");
  expect(first.code).toBe(0);
  const stopped = JSON.parse(first.out);
  expect(stopped).toMatchObject({ sent: 7, stopped_by: "limit" });
  expect(stopped.resume_command).toContain("--where");
  const sent = await cli("--where", where, ...stopped.resume.split(" "));
  expect(sent.code).toBe(0);
  expect(JSON.parse(sent.out).sent).toBe(selected.length - 7);
  const replayed = await consumeN(n.raw, RECORDS + selected.length);
  expect([0, 1, 2].reduce((sum, p) => sum + topicLength(n.raw, p), 0)).toBe(RECORDS + selected.length);
  const payloads = new Set(replayed.slice(0).map(text));
  const q = `SELECT original_payload FROM ${n.database}.${n.table}_dlq WHERE ${sql}`;
  for (const r of await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ original_payload: string }>())
    expect(payloads.has(r.original_payload)).toBe(true);
  // The DLQ topic made anew over the old table: other envelopes at the rows' offsets, none sent.
  const other = await createTopic("dlq-where-anew");
  const op = new Producer(props);
  await op.produceBatch(other, Array.from({ length: 2 * total }, (_, i) => encodeEnvelope({ reason: "invalid_rat_value", field: "rat", payload: `{"raw_id":"other-${i}"}`, payloadIsObject: true }, new Date(), "w")));
  op.close();
  const before = [0, 1, 2].reduce((sum, p) => sum + topicLength(n.raw, p), 0);
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "replay", "--unverified", "--where", where], { env: { ...env, KAFKA_TOPIC_DLQ: other }, stdout: "pipe", stderr: "pipe" });
  const [anewOut, anewCode] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(anewCode).toBe(0);
  expect(JSON.parse(anewOut)).toMatchObject({ sent: 0, not_the_rows_payload: selected.length });
  expect([0, 1, 2].reduce((sum, p) => sum + topicLength(n.raw, p), 0)).toBe(before);
  await deleteTopics(other);
  // Not a predicate of the grammar: refused with where, and nothing sent or asked.
  for (const bad of ["1 = 1; DROP TABLE x", "failure_reason = 'a' OR sleep(3)", "original_payload = 'x' --", "nope = 1", "(SELECT 1) = 1"]) {
    const r = await cli("--where", bad);
    expect(r.code).toBe(2);
    expect(r.err).toContain("--where:");
  }
}, 120_000);

describe("dlq fill on every group protocol", () => {
  for (const protocol of GROUP_PROTOCOLS) {
    test(`${protocol.name}: two fillers, one killed with SIGKILL mid-way; the other stores the rest, each record once`, async () => {
      const n = await names(`dlq-fill-${protocol.id}`);
      // Under KIP-848 the session is the broker's (6 s on the test brokers); the classic one the client's.
      const env = workerEnv(n, { ...protocol.env, ...(protocol.id === "consumer" ? {} : { KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" }), BATCH_SIZE: "20", BATCH_FLUSH_INTERVAL_SECONDS: "0.05" });
      const envelopes = (from: number, count: number) =>
        Array.from({ length: count }, (_, i) => encodeEnvelope({ reason: "malformed_json", field: null, payload: `p-${from + i}`, payloadIsObject: false }, new Date(), "w"));
      const p = new Producer(props);
      await p.produceBatch(n.dlq, envelopes(0, 400));
      const [a, b] = [fill(env), fill(env)];
      await waitFor(async () => ((await tableCounts(n)).rows >= 100 ? true : undefined), 30_000, "100 rows");
      a.kill("SIGKILL");
      await a.exited;
      await p.produceBatch(n.dlq, envelopes(400, 100));
      p.close();
      await waitFor(async () => ((await tableCounts(n)).rows >= 500 ? true : undefined), 60_000, "500 rows");
      b.kill("SIGTERM");
      expect(await b.exited).toBe(0);
      expect(await tableCounts(n)).toEqual({ rows: 500, offsets: 500 });
      // The lease is measured against the session the coordinator keeps: the group's under KIP-848.
      const running = JSON.parse((await Bun.file(b.logFile).text()).split("\n").find((l) => l.includes("dlq fill running"))!);
      expect(running.session_from).toBe(protocol.id === "consumer" ? "group" : "member");
    }, 120_000);
  }
});
