// Transactions through the real broker: records and a group's offsets visible together or not at
// all, fencing by a newer producer and by the group's generation, and a transaction the coordinator
// timed out. What the worker's exactly-once delivery rests on.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { TransactionError, Transactions, transactionalId } from "../../src/kafka/transaction.ts";
import { committedOffsets, createTopic, deleteTopics, props, text } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

async function topic(prefix: string): Promise<string> {
  const name = await createTopic(prefix, 1);
  cleanup.push(name);
  return name;
}

function transactional(id: string, extra: Record<string, string> = {}, onEventLoop = false): { producer: Producer; txn: Transactions } {
  const producer = new Producer({ ...props, "transactional.id": id, "transaction.timeout.ms": "10000", ...extra });
  return { producer, txn: new Transactions(producer, { onEventLoop }) };
}

/** Every record of a partition as `isolation` shows it, read to the partition's end. */
async function readAll(name: string, isolation: "read_committed" | "read_uncommitted"): Promise<Message[]> {
  const c = new Consumer({
    props: { ...props, "group.id": uniqueName("reader"), "isolation.level": isolation, "enable.partition.eof": "true" },
    topics: [name],
  });
  const out: Message[] = [];
  const deadline = Date.now() + 30_000;
  try {
    while (c.endReached(0) === undefined) {
      if (Date.now() > deadline) throw new Error(`no end of ${name} in 30 s`);
      const batch = c.poll();
      out.push(...batch);
      if (batch.length === 0) await c.waitForMessages(100);
    }
  } finally {
    await c.close();
  }
  return out;
}

/** A member of `group` on `input`, polled until the group assigned it the partition. */
async function member(group: string, input: string): Promise<Consumer> {
  const c = new Consumer({ props: { ...props, "group.id": group }, topics: [input] });
  const deadline = Date.now() + 30_000;
  while (c.assignment.length === 0) {
    if (Date.now() > deadline) throw new Error(`${group} got no assignment of ${input}`);
    c.poll();
    await c.waitForMessages(50);
  }
  return c;
}

describe("transactions", () => {
  // Each call on a thread of its own (txn-thread.ts), and where that cannot be built on the event loop in slices.
  for (const onEventLoop of [false, true])
  test(`records and the group's offsets become visible together; an aborted transaction's never${onEventLoop ? " (calls on the event loop)" : ""}`, async () => {
    const input = await topic("txn-in");
    const out = await topic("txn-out");
    const group = uniqueName("txn-group");
    const consumer = await member(group, input);
    const { producer, txn } = transactional(transactionalId(group, "a"), {}, onEventLoop);
    try {
      await txn.init(30_000);
      expect(txn.state).toBe("ready");

      txn.begin();
      // Purged by the abort, or sent and marked aborted: heard either way, never seen.
      const aborted = [producer.produce(out, "aborted-1"), producer.produce(out, "aborted-2")].map((p) => p.catch((e: unknown) => e));
      const md = consumer.groupMetadata();
      await txn.sendOffsets([{ topic: input, partition: 0, offset: 3n, metadata: "aborted" }], md, 10_000);
      await txn.abort(10_000);
      md.destroy();
      await Promise.all(aborted);
      expect(committedOffsets(group, input, 1).get(0)).toBe(-1001n);

      txn.begin();
      const sent = producer.produce(out, "committed-1");
      const md2 = consumer.groupMetadata();
      await txn.sendOffsets([{ topic: input, partition: 0, offset: 7n, metadata: "v2:kept" }], md2, 10_000);
      await txn.commit(10_000);
      md2.destroy();
      expect(txn.state).toBe("ready");
      // Offset 0 when the abort purged its records before the partition joined the transaction:
      // then no abort marker precedes it. The report must name where the record is.
      const at = (await sent).offset;

      expect(committedOffsets(group, input, 1).get(0)).toBe(7n);
      const committed = await readAll(out, "read_committed");
      expect(committed.map(text)).toEqual(["committed-1"]);
      expect(committed[0]?.offset).toBe(at);
      const everything = await readAll(out, "read_uncommitted");
      // What reached the log of the aborted transaction is there, only hidden from read_committed.
      expect(everything.map(text)).toContain("committed-1");
      expect(everything.map(text).filter((v) => v.startsWith("committed")).length).toBe(1);
    } finally {
      producer.close();
      await consumer.close();
    }
  });

  test("a newer producer with the same transactional.id fences the older: PRODUCER_FENCED, fatal, named", async () => {
    const out = await topic("txn-fence");
    const id = transactionalId(uniqueName("txn-group"), "a");
    const older = transactional(id);
    const newer = transactional(id);
    try {
      await older.txn.init(30_000);
      older.txn.begin();
      void older.producer.produce(out, "from-the-older").catch(() => {});
      await older.producer.flush(10_000);
      await newer.txn.init(30_000); // aborts what the older left open, and fences it
      const e = await older.txn.commit(10_000).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(TransactionError);
      const te = e as TransactionError;
      expect(te.fatal).toBe(true);
      expect(te.fenced).toBe(true);
      expect(te.message).toMatch(/fenced/i);
      expect(older.txn.state).toBe("failed");

      newer.txn.begin();
      await newer.producer.produce(out, "from-the-newer");
      await newer.txn.commit(10_000);
      expect((await readAll(out, "read_committed")).map(text)).toEqual(["from-the-newer"]);
    } finally {
      older.producer.close();
      newer.producer.close();
    }
  });

  test("offsets sent with a generation the member has left are refused: the transaction must abort", async () => {
    const input = await topic("txn-gen");
    const out = await topic("txn-gen-out");
    const group = uniqueName("txn-group");
    const first = await member(group, input);
    const stale = first.groupMetadata();
    // A second member joins: the group rebalances and the first member's generation moves on.
    const second = new Consumer({ props: { ...props, "group.id": group }, topics: [input] });
    const { producer, txn } = transactional(transactionalId(group, "a"));
    try {
      const deadline = Date.now() + 30_000;
      let revoked = false;
      let reassigned = false;
      first.takeAssigned();
      while (!reassigned) {
        if (Date.now() > deadline) throw new Error("the group did not rebalance");
        first.poll();
        second.poll();
        if (first.pendingRevoke) {
          first.completeRevoke();
          revoked = true;
        }
        const assigned = [...first.takeAssigned(), ...second.takeAssigned()];
        reassigned = revoked && assigned.length > 0;
        await Bun.sleep(20);
      }
      await txn.init(30_000);
      txn.begin();
      void producer.produce(out, "never-visible").catch(() => {});
      const e = await txn.sendOffsets([{ topic: input, partition: 0, offset: 1n }], stale, 10_000).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(TransactionError);
      const te = e as TransactionError;
      expect(te.kafkaName).toBe("ILLEGAL_GENERATION");
      expect(te.abortable).toBe(true);
      expect(te.fatal).toBe(false);
      await txn.abort(10_000);
      expect(txn.state).toBe("ready");
      expect(committedOffsets(group, input, 1).get(0)).toBe(-1001n);
      expect(await readAll(out, "read_committed")).toEqual([]);
    } finally {
      stale.destroy();
      producer.close();
      await first.close();
      await second.close();
    }
  });

  test("a transaction open past transaction.timeout.ms fences its producer; a new one with the same id goes on", async () => {
    // The coordinator's sweep aborts it (every second on the test brokers) and bumps the id's epoch:
    // librdkafka 2.15 reports that as _FENCED, fatal, as it does a newer instance.
    const out = await topic("txn-timeout");
    const id = transactionalId(uniqueName("txn-group"), "a");
    const first = transactional(id, { "transaction.timeout.ms": "1000" });
    const next = transactional(id);
    try {
      await first.txn.init(30_000);
      first.txn.begin();
      await first.producer.produce(out, "timed-out");
      let e: unknown = null;
      const deadline = Date.now() + 30_000;
      // Each try produces into the open transaction; the first after the sweep is refused.
      while (e === null && Date.now() < deadline) {
        await Bun.sleep(500);
        e = await first.producer.produce(out, "still-open").then(
          () => null,
          (err: unknown) => err,
        );
      }
      e ??= await first.txn.commit(10_000).then(
        () => null,
        (err: unknown) => err,
      );
      expect((e as Error).message).toMatch(/fenced|_FENCED/i);

      await next.txn.init(30_000);
      next.txn.begin();
      await next.producer.produce(out, "after");
      await next.txn.commit(10_000);
      expect((await readAll(out, "read_committed")).map(text)).toEqual(["after"]);
    } finally {
      first.producer.close();
      next.producer.close();
    }
  });
});
