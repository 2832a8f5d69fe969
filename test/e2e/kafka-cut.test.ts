// A worker cut off from Kafka, but not from ClickHouse, while records keep coming and a second worker
// takes its partitions over: the partition exactly-once has to hold across. The cut worker still has
// records fetched, batches held and a transaction open; it can still insert, and it hears nothing
// from the group. Its lease (the coordinator's last answers) ends its inserts before the group can
// give its partitions away; its open transaction never commits, so none of its envelopes shows. Healed,
// it finds its partitions gone, its transaction refused (or timed out by the coordinator, its producer
// fenced and made again), and goes on as a member again. Counted with merges stopped and without FINAL: every valid record
// once in ClickHouse, every invalid one once in the DLQ as a read_committed reader sees it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { KafkaCut } from "../support/cut.ts";
import { GROUP_PROTOCOLS } from "../support/protocols.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedThrough, props } from "../support/kafka.ts";
import { dlqCount, reportScenario, stallMeter, storedFigures } from "../support/scenario-meter.ts";
import { KAFKA_BROKERS, ROOT } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names, storedCounts } = e2eScope();

/** A 6 s session, as the test brokers give a KIP-848 group (which refuses the member's own). */
const groupTimeouts = (protocol: Record<string, string>) => ({
  ...protocol,
  ...(protocol.KAFKA_PROP_GROUP_PROTOCOL === "consumer"
    ? {}
    : { KAFKA_PROP_SESSION_TIMEOUT_MS: "6000", KAFKA_PROP_HEARTBEAT_INTERVAL_MS: "1000" }),
  BATCH_SIZE: "200",
});

/** Produces synthetic records, 100 every 50 ms, until stopped; counts what it sent. */
function steadyProducer(topic: string) {
  const gen = new SyntheticCdrs({ seed: 77, invalidShare: 0.05, idPrefix: "cut" });
  const p = new Producer({ ...props, "linger.ms": "5" });
  const sent = { valid: 0, invalid: 0 };
  let running = true;
  const done = (async () => {
    while (running) {
      const values = Array.from({ length: 100 }, () => {
        const r = gen.next();
        if (r.defect) sent.invalid++;
        else sent.valid++;
        return r.text;
      });
      await p.produceBatch(topic, values);
      await Bun.sleep(50);
    }
    p.close();
  })();
  return {
    sent,
    async stop(): Promise<void> {
      running = false;
      await done;
    },
  };
}

for (const protocol of GROUP_PROTOCOLS)
  test(`${protocol.name}: a worker cut off from Kafka but not from ClickHouse while another takes over: nothing stored twice, nothing dead-lettered twice, nothing lost`, async () => {
    const GROUP_TIMEOUTS = groupTimeouts(protocol.env);
    const n = await names("kafkacut");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}_offsets` });
    const cut = new KafkaCut(Number(KAFKA_BROKERS.split(",")[0]!.split(":").at(-1)));
    const producing = steadyProducer(n.raw);
    const workers: RunningWorker[] = [];
    let meter: ReturnType<typeof stallMeter> | null = null;
    try {
      const a = await startWorker(workerEnv(n, { ...GROUP_TIMEOUTS, WORKER_INSTANCE: "cut-a" }), cut.command(["bun", `${ROOT}/src/main.ts`, "run"]));
      workers.push(a);
      await statsWhen(a, (s) => s.assigned_partitions.length === 3 && s.total_clickhouse > 1000 && s.total_dlq > 0, 30_000, "a storing");
      meter = stallMeter(ch, n);
      await cut.cut();
      const atCut = await a.stats();
      const b = await startWorker(workerEnv(n, { ...GROUP_TIMEOUTS, WORKER_INSTANCE: "cut-b" }));
      workers.push(b);
      // The group gives b every partition once a's session has ended; b stores and dead-letters.
      await statsWhen(b, (s) => s.assigned_partitions.length === 3 && s.total_clickhouse > 1000 && s.total_dlq > 0, 40_000, "b took over");
      // a, still cut off, has gone on inserting what it held only within its lease: it stopped.
      const aAfter = await a.stats();
      await cut.heal();
      await producing.stop();
      const total = producing.sent.valid + producing.sent.invalid;
      await committedThrough(n.group, n.raw, 3, total, 90_000);
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
      // What happened, should a count be off.
      const trace = () => console.log({ atCut: atCut.total_clickhouse, aAfter: aAfter.total_clickhouse, a: a.logs.slice(-30), b: b.logs.slice(-15) });
      const c = await storedCounts(n);
      const { valid, invalid } = producing.sent;
      if (c.rows !== valid || c.ids !== valid) trace();
      expect([c.rows, c.ids, c.offsetRows, c.offsets]).toEqual([valid, valid, valid, valid]);
      const dlq = await dlqCount(n.dlq);
      reportScenario({
        scenario: "cut from Kafka, a second worker takes over",
        protocol: protocol.id,
        ...storedFigures(c, dlq, await meter.stop(c.offsets)),
      });
      expect([dlq.envelopes, dlq.sources]).toEqual([invalid, invalid]);
    } finally {
      await meter?.stop(0);
      await producing.stop();
      await cut.remove(workers.map((w) => w.proc.pid));
      for (const w of workers) w.proc.kill("SIGKILL");
    }
  }, 180_000);
