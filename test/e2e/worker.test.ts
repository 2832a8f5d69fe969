// The worker end to end against the real Kafka and ClickHouse: one test per spec scenario of the
// delivery core, asserting on ClickHouse rows, DLQ envelopes and the group's committed offsets.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Producer } from "../../src/kafka/producer.ts";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, committedOffsets, consumeN, deleteTopics, header, props, text } from "../support/kafka.ts";
import { CLICKHOUSE_URL, KAFKA_SASL_BROKERS, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

async function produce(topic: string, records: Array<{ partition: number; value: string }>): Promise<void> {
  const p = new Producer(props);
  try {
    for (const r of records) await p.produce(topic, r.value, { partition: r.partition });
  } finally {
    p.close();
  }
}

async function count(n: Names): Promise<number> {
  const rs = await ch.query({ query: `SELECT count() AS c FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
  return Number((await rs.json<{ c: string }>())[0]!.c);
}

const valid = (i: number, extra: Record<string, unknown> = {}) => toJson(withFields({ raw_id: `r-${i}`, ...extra }));

describe("micro-batching, at-least-once, stats", () => {
  test("Offsets committed after successful write: rows, DLQ envelopes, committed offsets and exact stats after a known input", async () => {
    const n = await names("known");
    // 10 valid of 2 services and 2 RATs, 3 invalid of 3 reasons, spread over the 3 partitions.
    const records = [
      ...Array.from({ length: 10 }, (_, i) => ({ partition: i % 3, value: valid(i, { svc: i < 6 ? "voice" : "data", rat: i < 7 ? 1 : 9 }) })),
      { partition: 0, value: "{not json" },
      { partition: 1, value: toJson(withFields({ raw_id: "bad-rat", rat: 4 })) },
      { partition: 2, value: toJson(withFields({ raw_id: "bad-epoch", epoch_start: 10, epoch_end: 5 })) },
    ];
    await produce(n.raw, records);
    const w = await startWorker(workerEnv(n, { CLICKHOUSE_PASSWORD: "" }));
    const s = await statsWhen(w, (s) => s.total_processed === 13 && s.partitions["0"]?.committed_offset === 5 && s.partitions["1"]?.committed_offset === 4 && s.partitions["2"]?.committed_offset === 4);
    expect(s).toMatchObject({
      total_processed: 13,
      total_dlq: 3,
      in_flight_buffer: 0,
      by_service_type: { voice: 6, data: 4 },
      by_rat: { "3G": 7, LTE_4G: 0, "5G_NR": 3 },
      by_dlq_reason: { malformed_json: 1, invalid_rat_value: 1, invalid_epoch: 1, missing_required_field: 0, normalization_error: 0, ch_insert_failed: 0 },
    });
    expect(s.last_flush_at).toMatch(/Z$/);
    // Completeness: consumed = durable in ClickHouse + durable in DLQ + in flight, per partition.
    for (const p of Object.values(s.partitions) as Array<Record<string, number>>) expect(p.consumed).toBe(p.durable_clickhouse! + p.durable_dlq! + p.in_flight!);
    expect(await count(n)).toBe(10);
    const rows = await (await ch.query({ query: `SELECT raw_id, msisdn, radio_access_type, cell_id, total_bytes, IPv4NumToString(source_ip) AS ip, toString(session_start_time) AS start FROM ${n.database}.${n.table} WHERE raw_id = 'r-0'`, format: "JSONEachRow" })).json();
    expect(rows).toEqual([{ raw_id: "r-0", msisdn: "+4915112345678", radio_access_type: "3G", cell_id: "1234_5678", total_bytes: "3000", ip: "10.1.2.3", start: "2023-11-14 22:13:20" }]);
    const dlq = await consumeN(n.dlq, 3);
    const envelopes = dlq.map((m) => JSON.parse(text(m)));
    expect(envelopes.map((e) => e.failure_reason).sort()).toEqual(["invalid_epoch", "invalid_rat_value", "malformed_json"]);
    for (const e of envelopes) expect(Object.keys(e).sort()).toEqual(["failed_at", "failed_field", "failure_reason", "original_payload", "worker_instance"]);
    const malformed = dlq.find((m) => JSON.parse(text(m)).failure_reason === "malformed_json")!;
    expect(JSON.parse(text(malformed)).original_payload).toBe("{not json");
    expect([header(malformed, HEADERS.sourceTopic), header(malformed, HEADERS.sourcePartition), header(malformed, HEADERS.sourceOffset)]).toEqual([n.raw, "0", "4"]);
    expect(committedOffsets(n.group, n.raw, 3)).toEqual(new Map([[0, 5n], [1, 4n], [2, 4n]]));
    expect(await w.stop()).toBe(0);
  });

  test("Batch flushed on count threshold, and SIGTERM received during operation flushes the rest, commits and exits 0", async () => {
    const n = await names("count");
    const w = await startWorker(workerEnv(n, { BATCH_SIZE: "5", BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
    await produce(n.raw, Array.from({ length: 13 }, (_, i) => ({ partition: 0, value: valid(i) })));
    const s = await statsWhen(w, (s) => s.total_consumed === 13 && s.flush_count === 2 && s.partitions["0"]?.committed_offset === 10);
    expect(s.buffered_rows).toBe(3); // the interval is an hour: only full batches went out
    expect(await count(n)).toBe(10);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(10n);
    expect(await w.stop("SIGTERM")).toBe(0);
    expect(await count(n)).toBe(13);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(13n);
    expect(w.logs.some((l) => l.includes("stopped cleanly"))).toBe(true);
  });

  test("Batch flushed on time interval threshold", async () => {
    const n = await names("interval");
    const w = await startWorker(workerEnv(n, { BATCH_SIZE: "1000", BATCH_FLUSH_INTERVAL_SECONDS: "0.3" }));
    await produce(n.raw, [{ partition: 1, value: valid(1) }, { partition: 1, value: valid(2) }]);
    await waitFor(async () => ((await count(n)) === 2 ? true : undefined), 10_000, "rows after the interval");
    // The rows are visible on the server a moment before the worker has read the insert's answer.
    // Both rows in one batch or two: the flush timer may fire between their arrivals.
    const s = await statsWhen(w, (x) => x.flush_count >= 1 && x.buffered_rows === 0, 5_000, "the worker heard the inserts' answers");
    expect(s.flush_count).toBeGreaterThanOrEqual(1);
    expect(s.buffered_rows).toBe(0);
    expect(await w.stop()).toBe(0);
  });
});

describe("Safe partition progress and confirmed DLQ", () => {
  test("Valid record precedes an invalid record: the invalid record's offset is committed only after the valid rows are flushed", async () => {
    const n = await names("order");
    const w = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "3600", DELIVERY: "at-least-once" }));
    await produce(n.raw, [{ partition: 0, value: valid(1) }, { partition: 0, value: "bad" }, { partition: 0, value: valid(2) }]);
    await consumeN(n.dlq, 1); // the invalid record reached the DLQ at once
    await statsWhen(w, (s) => s.total_dlq === 1 && s.buffered_rows === 2);
    // Nothing past offset 0 committed: it is not durable
    expect(committedOffsets(n.group, n.raw, 1).get(0) ?? -1n).toBeLessThanOrEqual(0n);
    expect(await w.stop()).toBe(0); // flushes the two rows, then commits
    expect(await count(n)).toBe(2);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(3n);
  });

  // Exactly-once: the envelope goes in the transaction whose commit passes its record, so it is sent
  // once the valid row before it is stored, and a DLQ reader sees it together with that commit.
  test("exactly-once: the invalid record's envelope is visible only with the commit past it, after the valid row before it is flushed", async () => {
    const n = await names("order-eo");
    const w = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
    await produce(n.raw, [{ partition: 0, value: valid(1) }, { partition: 0, value: "bad" }, { partition: 0, value: valid(2) }]);
    await statsWhen(w, (s) => s.total_consumed === 3 && s.buffered_rows === 2);
    expect(await committedCount(n.dlq)).toBe(0);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBeLessThanOrEqual(0n); // 0: the start the replay check marked
    expect(await w.stop()).toBe(0); // flushes the two rows, then the envelope and the commit together
    expect(await count(n)).toBe(2);
    expect(await committedCount(n.dlq)).toBe(1);
    expect(committedOffsets(n.group, n.raw, 1).get(0)).toBe(3n);
  });

  test("an invalid record with no uncommitted record before it on its partition is committed immediately", async () => {
    const n = await names("first");
    const w = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
    await produce(n.raw, [{ partition: 2, value: "bad" }, { partition: 2, value: valid(1) }]);
    await statsWhen(w, (s) => s.partitions["2"]?.committed_offset === 1);
    expect(committedOffsets(n.group, n.raw, 3).get(2)).toBe(1n);
    expect(await w.stop()).toBe(0);
    expect(committedOffsets(n.group, n.raw, 3).get(2)).toBe(2n);
  });

  test("Destination or commit failure: an undeliverable DLQ record stops the worker nonzero without advancing past it", async () => {
    const n = await names("dlqdown");
    const w = await startWorker(workerEnv(n, { KAFKA_PROP_MESSAGE_TIMEOUT_MS: "3000", BATCH_SIZE: "2", BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
    await deleteTopics(n.dlq);
    await produce(n.raw, [{ partition: 0, value: valid(1) }, { partition: 0, value: valid(2) }, { partition: 0, value: "bad" }, { partition: 0, value: valid(3) }, { partition: 0, value: valid(4) }]);
    const code = await w.proc.exited;
    expect(code).toBe(1);
    const committed = committedOffsets(n.group, n.raw, 1).get(0)!;
    expect(committed).toBeLessThanOrEqual(2n); // never past the undelivered record at offset 2
    expect(w.logs.some((l) => l.includes("fatal"))).toBe(true);
    expect(w.logs.some((l) => l.includes("ClickHouse insert failed"))).toBe(false); // not reclassified as a storage failure
  }, 30_000);
});

describe("security basics", () => {
  test("credentials set through the environment never appear in logs, even at debug level; every log line is JSON", async () => {
    const n = await names("secrets");
    const env = workerEnv(n, { LOG_LEVEL: "debug", CLICKHOUSE_PASSWORD: "s3cret-ch-pw", KAFKA_PROP_SASL_USERNAME: "svc", KAFKA_PROP_SASL_PASSWORD: "s3cret-kafka-pw" });
    const proc = Bun.spawn(["bun", `${import.meta.dir}/../../src/main.ts`, "run"], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(1); // ClickHouse refuses the password for its password-less default user
    const lines = (out + err).trim().split("\n");
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(() => JSON.parse(l)).not.toThrow();
    expect(err).toContain('"code":"CLICKHOUSE_SCHEMA"'); // the failure is reported…
    expect(err).toContain("Wrong password");
    expect(out + err).not.toContain("s3cret-ch-pw"); // …without the secrets
    expect(out + err).not.toContain("s3cret-kafka-pw");
  });

  test("secrets read from files (CLICKHOUSE_PASSWORD_FILE, KAFKA_PROP_SASL_PASSWORD_FILE) never appear in logs either", async () => {
    const n = await names("secretfiles");
    const dir = mkdtempSync(`${tmpdir()}/cdr-secret-files-`);
    writeFileSync(`${dir}/ch`, "s3cret-ch-file-pw\n");
    writeFileSync(`${dir}/kafka`, "s3cret-kafka-file-pw\n");
    const env = workerEnv(n, { LOG_LEVEL: "debug", CLICKHOUSE_PASSWORD_FILE: `${dir}/ch`, KAFKA_PROP_SASL_USERNAME: "svc", KAFKA_PROP_SASL_PASSWORD_FILE: `${dir}/kafka` });
    const proc = Bun.spawn(["bun", `${import.meta.dir}/../../src/main.ts`, "run"], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(1);
    expect(err).toContain("Wrong password"); // the file's password reached ClickHouse…
    expect(out + err).not.toContain("s3cret-ch-file-pw"); // …and no log line
    expect(out + err).not.toContain("s3cret-kafka-file-pw");
  });
});

describe("no core files by default", () => {
  /** The worker's soft core file size limit, from /proc, started under a shell that allows cores. */
  async function coreLimitOf(extra: Record<string, string>): Promise<string> {
    const n = await names("core");
    const main = `${import.meta.dir}/../../src/main.ts`;
    const w = await startWorker(workerEnv(n, extra), ["bash", "-c", `ulimit -S -c unlimited && exec bun ${main} run`]);
    const limits = await Bun.file(`/proc/${w.proc.pid}/limits`).text();
    expect(await w.stop()).toBe(0);
    return limits.split("\n").find((l) => l.startsWith("Max core file size"))!.split(/\s{2,}/)[1]!;
  }

  test("the worker turns core dumps off at start (a core holds credentials and CDRs); CORE_DUMPS=on keeps the limit it got", async () => {
    expect(await coreLimitOf({})).toBe("0");
    expect(await coreLimitOf({ CORE_DUMPS: "on" })).toBe("unlimited");
  });
});

describe("rebalance and shutdown deadlines", () => {
  test("on revoke a worker flushes and commits its buffered rows before giving partitions up: no record is inserted twice", async () => {
    const n = await names("rebalance");
    const env = workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "3600", KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" });
    const a = await startWorker(env);
    await produce(n.raw, Array.from({ length: 30 }, (_, i) => ({ partition: i % 3, value: valid(i) })));
    await statsWhen(a, (s) => s.total_consumed === 30 && s.buffered_rows === 30);
    expect(await count(n)).toBe(0); // buffered for an hour, unless a rebalance forces the flush
    const b = await startWorker(env);
    await waitFor(async () => ((await count(n)) === 30 ? true : undefined), 30_000, "rows flushed on revoke");
    await statsWhen(b, (s) => s.ready?.ready === true, 30_000, "second worker assigned");
    expect(committedOffsets(n.group, n.raw, 3)).toEqual(new Map([[0, 10n], [1, 10n], [2, 10n]]));
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
    const rs = await ch.query({ query: `SELECT count() AS c, uniqExact(cdr_id) AS u FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
    expect(await rs.json()).toEqual([{ c: "30", u: "30" }]);
  }, 60_000);

  test("a shutdown that cannot flush in SHUTDOWN_TIMEOUT_SECONDS exits nonzero and commits nothing that is not durable", async () => {
    const n = await names("deadline");
    const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
    const w = await startWorker(workerEnv(n, {
      CLICKHOUSE_URL: proxy.url, BATCH_FLUSH_INTERVAL_SECONDS: "3600", SHUTDOWN_TIMEOUT_SECONDS: "2",
      CH_RETRY_MAX_ATTEMPTS: "5", CH_RETRY_INITIAL_DELAY_MS: "5000",
    }));
    try {
      await produce(n.raw, [{ partition: 0, value: valid(1) }, { partition: 0, value: valid(2) }]);
      await statsWhen(w, (s) => s.buffered_rows === 2);
      proxy.down();
      const started = Date.now();
      expect(await w.stop("SIGTERM")).toBe(1);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(committedOffsets(n.group, n.raw, 1).get(0)).toBeLessThanOrEqual(0n); // at most the start
      expect(w.logs.some((l) => l.includes("shutdown timed out"))).toBe(true);
    } finally {
      proxy.down();
    }
  }, 30_000);
});

describe("credentials through the environment work", () => {
  test("Kafka SASL/PLAIN via KAFKA_PROP_*: the worker consumes and dead-letters over the SASL listener, and the secret is never logged", async () => {
    const n = await names("sasl");
    await produce(n.raw, [{ partition: 0, value: valid(1) }, { partition: 0, value: "bad" }]);
    const w = await startWorker(workerEnv(n, {
      KAFKA_BROKERS: KAFKA_SASL_BROKERS, LOG_LEVEL: "debug",
      KAFKA_PROP_SECURITY_PROTOCOL: "SASL_PLAINTEXT", KAFKA_PROP_SASL_MECHANISMS: "PLAIN",
      KAFKA_PROP_SASL_USERNAME: "cdr", KAFKA_PROP_SASL_PASSWORD: "cdr-test-secret",
    }));
    await statsWhen(w, (s) => s.total_clickhouse === 1 && s.total_dlq === 1 && s.partitions["0"]?.committed_offset === 2);
    expect(await w.stop()).toBe(0);
    expect(w.logs.join("\n")).not.toContain("cdr-test-secret");
  });

  test("a wrong SASL password fails start-up with a clear error, exit 1", async () => {
    const n = await names("saslbad");
    const env = workerEnv(n, {
      KAFKA_BROKERS: KAFKA_SASL_BROKERS, KAFKA_PROP_SECURITY_PROTOCOL: "SASL_PLAINTEXT", KAFKA_PROP_SASL_MECHANISMS: "PLAIN",
      KAFKA_PROP_SASL_USERNAME: "cdr", KAFKA_PROP_SASL_PASSWORD: "wrong-secret-value",
    });
    const started = Date.now();
    const proc = Bun.spawn(["bun", `${import.meta.dir}/../../src/main.ts`, "run"], { env, stdout: "pipe", stderr: "pipe" });
    const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(1);
    expect(err).toMatch(/Authentication failed|SASL authentication error|_AUTHENTICATION/);
    // At the broker's first refusal, not at the end of the 10 s metadata wait.
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(err).not.toContain("wrong-secret-value");
  }, 30_000);
});
