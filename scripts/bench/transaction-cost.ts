/**
 * What one exactly-once commit costs the broker beside an at-least-once one: rounds of E envelopes
 * (400 bytes) and a commit of the group's offset, as the worker makes them, once with a
 * transactional producer (the envelopes and TxnOffsetCommit in one transaction: AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn and the markers) and once with a plain idempotent producer and the
 * consumer's own commit. Kafka's CPU ms a round (its process, all threads) and the wall ms a round,
 * alternated, the median of each. Why the worker spaces its transactions (delivery/delivery.ts
 * TRANSACTION_SPACING_MS): what a round costs is paid per commit, not per record.
 * Usage: bun scripts/bench/transaction-cost.ts [rounds=200] [envelopes=30] [pairs=3]   (services running)
 */
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { Transactions, transactionalId } from "../../src/kafka/transaction.ts";
import { processCpuSeconds, servicePid } from "../lib/harness.ts";

const ROUNDS = Number(process.argv[2] ?? 200);
const ENVELOPES = Number(process.argv[3] ?? 30);
const PAIRS = Number(process.argv[4] ?? 3);
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092";
const props = { "bootstrap.servers": brokers };
const kafkaPid = servicePid("kafka");
if (!kafkaPid) throw new Error("no Kafka started by scripts/services.sh: its CPU cannot be read");
const admin = new Admin(props);
const payload = "x".repeat(400);

async function rounds(transactional: boolean): Promise<Round> {
  const stamp = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const input = `txcost.in.${stamp}`, out = `txcost.out.${stamp}`, group = `txcost-${stamp}`;
  await admin.createTopics([input, out].map((name) => ({ name, partitions: 1, replicationFactor: 1, configs: {} })));
  const consumer = new Consumer({ props: { ...props, "group.id": group }, topics: [input] });
  const producer = new Producer({ ...props, ...(transactional ? { "transactional.id": transactionalId(group, "a") } : {}) });
  try {
    while (consumer.assignment.length === 0) {
      consumer.poll();
      await consumer.waitForMessages(50);
    }
    const txn = transactional ? new Transactions(producer) : null;
    await txn?.init(30_000);
    const cpu0 = processCpuSeconds(kafkaPid);
    const t0 = performance.now();
    for (let i = 0; i < ROUNDS; i++) {
      txn?.begin();
      const sent = Array.from({ length: ENVELOPES }, () => producer.produce(out, payload));
      await producer.flush(10_000);
      await Promise.all(sent);
      const offsets = [{ topic: input, partition: 0, offset: BigInt(i + 1) }];
      if (txn) {
        const md = consumer.groupMetadata();
        await txn.sendOffsets(offsets, md, 10_000);
        await txn.commit(10_000);
        md.destroy();
      } else await consumer.commit(offsets);
    }
    return {
      kafka_cpu_ms: +(((processCpuSeconds(kafkaPid) - cpu0) * 1000) / ROUNDS).toFixed(2),
      wall_ms: +((performance.now() - t0) / ROUNDS).toFixed(1),
    };
  } finally {
    producer.close();
    await consumer.close();
    await admin.deleteTopics([input, out]).catch(() => {});
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
type Round = { kafka_cpu_ms: number; wall_ms: number };
const runs: { transactional: Round[]; plain: Round[] } = { transactional: [], plain: [] };
for (let i = 0; i < PAIRS; i++) {
  for (const transactional of i % 2 ? [false, true] : [true, false]) {
    const r = await rounds(transactional);
    (transactional ? runs.transactional : runs.plain).push(r);
    console.log(JSON.stringify({ pair: i + 1, transactional, ...r }));
  }
}
const summary = (rs: Round[]) => ({ kafka_cpu_ms: median(rs.map((r) => r.kafka_cpu_ms)), wall_ms: median(rs.map((r) => r.wall_ms)) });
console.log(JSON.stringify({ rounds: ROUNDS, envelopes: ENVELOPES, pairs: PAIRS, transactional: summary(runs.transactional), plain: summary(runs.plain) }));
admin.close();
process.exit(0);
