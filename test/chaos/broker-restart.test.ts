// Kafka broker restarted mid-stream: the worker reconnects (librdkafka does) or exits nonzero for
// its supervisor; either way, after recovery nothing is lost and no offset was committed early.
import { expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { committedOffsets, committedSum, header, props, readCommitted } from "../support/kafka.ts";
import { e2eScope, storedCounts } from "../support/e2e.ts";
import { ROOT, run, uniqueName, waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { explainedBy, startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

test("broker restart mid-stream: every valid record in ClickHouse, every invalid one in the DLQ, offsets all committed", async () => {
  const n = await names("brokerrestart");
  const gen = new SyntheticCdrs({ seed: 41, invalidShare: 0.05, idPrefix: "br" });
  let valid = 0;
  const values = Array.from({ length: 30_000 }, () => { const r = gen.next(); if (!r.defect) valid++; return r.text; });
  const p = new Producer(props);
  await p.produceBatch(n.raw, values);
  p.close();
  // One WORKER_INSTANCE across the restart, as a supervisor keeps it: the new worker's
  // transactional.id fences the old one and ends what it left open at once.
  const env = workerEnv(n, { BATCH_SIZE: "500", WORKER_INSTANCE: "broker-restart" });
  let w: RunningWorker = await startWorker(env);
  await statsWhen(w, (s) => s.total_consumed >= 3000, 30_000, "progress before the restart");
  await run(["bash", `${ROOT}/scripts/services.sh`, "restart", "kafka"]);
  // Reconnected, or exited nonzero for its supervisor, now or while it catches up: then it is started
  // again, as a supervisor would.
  const exits: number[] = [];
  const supervised = <T>(what: string, ms: number, probe: () => Promise<T | undefined> | T | undefined) =>
    explainedBy(() => w, () => waitFor(async () => {
      if (w.proc.exitCode !== null) {
        exits.push(w.proc.exitCode);
        w = await startWorker(env);
      }
      return probe();
    }, ms, what));
  await supervised("all valid rows after the restart", 90_000, async () => {
    const rs = await ch.query({ query: `SELECT uniqExact(cdr_id) AS c FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
    return Number((await rs.json<{ c: string }>())[0]!.c) === valid ? true : undefined;
  });
  // Caught up: every record durable and committed, as the group's commits say. The worker's own stats
  // would say so too early: a worker started again leaves out the partitions it has read nothing of.
  await supervised("every record committed", 60_000, () => (committedSum(n.group, n.raw, 3) === 30_000 ? true : undefined));
  expect(exits.filter((code) => code === 0)).toEqual([]);
  expect(await w.stop()).toBe(0);
  // Nothing stored twice: count() beside the distinct ids, and the offsets table's rows.
  const c = await storedCounts(ch, n);
  expect([c.rows, c.ids, c.offsetRows, c.offsets]).toEqual([valid, valid, valid, valid]);
  // Nothing dead-lettered twice: as many envelopes as distinct sources.
  const dlq = await readCommitted(n.dlq);
  const sources = new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`));
  expect([dlq.length, sources.size]).toEqual([30_000 - valid, 30_000 - valid]);
}, 180_000);

test("SIGTERM while the broker does not answer (kill -STOP): exit 1 within the shutdown timeout plus 2 s, no hang in the consumer's close", async () => {
  const n = await names("brokerstopped");
  // The test before restarted the broker, which may still be loading its group coordinator: a member
  // that joined meanwhile can close without one. Its committed offsets answering says it is loaded.
  await waitFor(() => {
    try {
      committedOffsets(uniqueName("coordinator-probe"), n.raw, 1);
      return true;
    } catch {
      return undefined;
    }
  }, 30_000, "the broker's group coordinator loaded");
  // Records held unflushed (the interval is an hour), so the shutdown has a commit to make: one that
  // needs the broker. With nothing to commit, a close that has no request in flight may end at once.
  const w = await startWorker(workerEnv(n, { SHUTDOWN_TIMEOUT_SECONDS: "4", BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
  // The close is what this test is about, so the broker is stopped once the check at assignment is
  // done (test/e2e/slow-broker-check.test.ts stops it during one).
  await statsWhen(w, (s) => s.assigned_partitions.length === 3 && s.replay_checks_pending === 0, 30_000, "the worker owns the partitions, checked");
  const sent = await produceSynthetic(n.raw, 100, 0, 7);
  await statsWhen(w, (s) => s.buffered_rows === sent.valid, 30_000, "the records held, unflushed");
  // The broker scripts/services.sh started for KAFKA_BROKERS (this file runs on the first broker only).
  const broker = Number(await Bun.file(`${ROOT}/.local/kafka/kafka.pid`).text());
  process.kill(broker, "SIGSTOP");
  try {
    const started = Date.now();
    w.proc.kill("SIGTERM");
    const code = await Promise.race([w.proc.exited, Bun.sleep(15_000).then(() => "still running after 15 s")]);
    expect(code).toBe(1);
    expect(Date.now() - started).toBeLessThan(4_000 + 2_000);
  } finally {
    process.kill(broker, "SIGCONT");
    w.proc.kill("SIGKILL");
  }
}, 60_000);
