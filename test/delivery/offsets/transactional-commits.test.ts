// Exactly-once's commits over a scripted transactional producer: what goes into which transaction,
// when the positions are asked, and what an abort sends again. The real broker's side of the same
// calls is test/kafka/transaction.test.ts; the delivery simulation runs them under faults.
import { expect, setDefaultTimeout, test } from "bun:test";
import {
  MAX_TRANSACTION_BYTES,
  MAX_TRANSACTION_ENVELOPES,
  TransactionalCommits,
  type TransactionalCommitsOptions,
  type TransactionalProducer,
} from "../../../src/delivery/offsets/transactional-commits.ts";
import type { TopicPartition } from "../../../src/kafka/partition-list.ts";
import { KafkaError } from "../../../src/errors.ts";
import { TransactionError } from "../../../src/kafka/transaction.ts";
import { commitMetadata, readCommitMetadata, readCommitNonce } from "../../../src/delivery/offsets/commit-metadata.ts";
import { waitFor } from "../../support/services.ts";

setDefaultTimeout(60_000);

type Group = { generation: number; destroy(): void };

/** Records every call; `fail` scripts the next answers of a call by name. */
class Script implements TransactionalProducer<Group> {
  readonly calls: string[] = [];
  /** Runs while the offsets are being sent, once. */
  duringOffsets: (() => void) | null = null;
  readonly fail = new Map<string, TransactionError[]>();
  #reports: Array<() => void> = [];
  async init(): Promise<void> {
    this.calls.push("init");
  }
  begin(): void {
    this.calls.push("begin");
  }
  produce(_topic: string, value: string | Uint8Array | null): Promise<{ partition: number; offset: number }> {
    this.calls.push(`produce ${String(value)}`);
    return new Promise((resolve) => this.#reports.push(() => resolve({ partition: 0, offset: 0 })));
  }
  async flush(): Promise<void> {
    this.calls.push("flush");
    for (const r of this.#reports.splice(0)) r();
  }
  /** The offsets last sent, metadata included. */
  sentOffsets: readonly TopicPartition[] = [];
  async sendOffsets(offsets: readonly TopicPartition[]): Promise<void> {
    this.sentOffsets = offsets;
    this.duringOffsets?.();
    this.duringOffsets = null;
    this.#maybeFail("sendOffsets");
    this.calls.push(`offsets ${offsets.map((o) => `${o.partition}@${o.offset}`).join(",")}`);
  }
  async commit(): Promise<void> {
    this.#maybeFail("commit");
    this.calls.push("commit");
  }
  async abort(): Promise<void> {
    this.#maybeFail("abort");
    this.calls.push("abort");
  }
  close(): void {
    this.calls.push("close");
  }
  #maybeFail(call: string): void {
    const e = this.fail.get(call)?.shift();
    if (e) {
      this.calls.push(`${call} failed ${e.kafkaName}`);
      throw e;
    }
  }
}

const refusal = (name: string, v: "retry" | "abort" | "fatal") =>
  new TransactionError(`x: ${name}`, 1, name, v === "retry", v === "abort", v === "fatal");

/** A script whose first send is reported failed with `error` once failNext() is called. */
function failing(error: KafkaError) {
  const tx = new Script();
  let fail: ((e: unknown) => void) | null = null;
  const produce = tx.produce.bind(tx);
  tx.produce = (topic, value) => {
    if (fail !== null || tx.calls.some((c) => c.endsWith("(fails)"))) return produce(topic, value);
    tx.calls.push(`produce ${String(value)} (fails)`);
    return new Promise((_, reject) => (fail = reject));
  };
  const commits = new TransactionalCommits(tx, { group: () => ({ generation: 1, destroy: () => {} }), owns: () => true, topic: "cdr.raw", timeoutMs: 10_000 });
  return { tx, commits, failNext: () => fail!(error) };
}

/** `clock.ms`: the monotonic time the commits see; `renewed`: the producers made again, in order. */
function setup(owned = [0, 1], committed?: TransactionalCommitsOptions<Group>["committed"]) {
  const tx = new Script();
  const clock = { ms: 0 };
  const renewed: Script[] = [];
  const commits = new TransactionalCommits(tx, {
    group: () => ({ generation: 1, destroy: () => {} }),
    owns: (p) => owned.includes(p),
    topic: "cdr.raw",
    timeoutMs: 10_000,
    now: () => clock.ms,
    renew: () => {
      const next = new Script();
      renewed.push(next);
      return next;
    },
    ...(committed ? { committed } : {}),
  });
  return { tx, commits, clock, renewed };
}

const at = (partition: number, offset: number): TopicPartition => ({ topic: "cdr.raw", partition, offset: BigInt(offset) });

test("the positions are asked after every envelope's report, and the commit carries them with the envelopes", async () => {
  const { tx, commits } = setup();
  const reported: number[] = [];
  void commits.produce("dlq", "e5", {}, { partition: 0, offset: 5 }).then(() => reported.push(5));
  let asked = -1;
  expect(await commits.commit(() => ((asked = reported.length), [at(0, 6)]))).toBe(true);
  expect(asked).toBe(1);
  expect(tx.calls).toEqual(["begin", "produce e5", "flush", "offsets 0@6", "commit"]);
});

test("an envelope that comes while the reports do joins the transaction; one that comes once it is closed, the next", async () => {
  const { tx, commits } = setup();
  const committing = commits.commit(() => [at(0, 2)]);
  void commits.produce("dlq", "joins", {}, { partition: 0, offset: 1 });
  let late: Promise<unknown> = Promise.resolve();
  tx.duringOffsets = () => (late = commits.produce("dlq", "late", {}, { partition: 0, offset: 2 }));
  expect(await committing).toBe(true);
  await Promise.resolve();
  // The commit flushed again for the envelope that joined, and closed the transaction to the late one.
  expect(tx.calls).toEqual(["begin", "flush", "produce joins", "flush", "offsets 0@2", "commit", "begin", "produce late"]);
  expect(await commits.commit(() => [at(0, 3)])).toBe(true);
  await late;
});

// Purged by an abort, or timed out (the broker unreachable past message.timeout.ms, a restart: once
// the worker stopped on it): the transaction fails, not the envelope.
test.each([
  ["purged from its transaction", new KafkaError("KAFKA_DELIVERY", "purged", -152, "_PURGE_QUEUE")],
  ["that timed out (the broker unreachable)", new KafkaError("KAFKA_DELIVERY", "timed out", -192, "_MSG_TIMED_OUT")],
])("an envelope %s makes its transaction abort instead of commit, and goes again; its sender hears one report", async (_what, error) => {
  const { tx, commits, failNext } = failing(error);
  const delivered = commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  failNext();
  expect(await commits.commit(() => [at(0, 2)])).toBe(false);
  expect(await commits.commit(() => [at(0, 2)])).toBe(true);
  expect(await delivered).toEqual({ partition: 0, offset: 0 });
  expect(tx.calls).toEqual(["begin", "produce e1 (fails)", "flush", "abort", "begin", "produce e1", "flush", "offsets 0@2", "commit"]);
});

// The cluster's broker kill -9: an envelope of the transaction failed (timed out) while no commit
// was due, since its own hold waited for its report. Nothing aborted the transaction, and the
// worker stalled for good.
test("regression: a send that fails while no commit comes aborts the transaction at once; the envelope goes again and its sender hears it", async () => {
  const { tx, commits, failNext } = failing(new KafkaError("KAFKA_DELIVERY", "timed out", -192, "_MSG_TIMED_OUT"));
  const delivered = commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  failNext();
  await waitFor(() => (tx.calls.includes("produce e1") ? true : undefined), 5000, "the envelope sent again");
  expect(tx.calls).toEqual(["begin", "produce e1 (fails)", "abort", "begin", "produce e1"]);
  expect(commits.refusal).toBe("DLQ_SEND_PURGED");
  expect(await commits.commit(() => [at(0, 2)])).toBe(true);
  expect(await delivered).toEqual({ partition: 0, offset: 0 });
});

test("an envelope still timing out once the delivery timeout has passed (the DLQ topic gone?) fails its sender: the worker stops", async () => {
  const tx = new Script();
  const clock = { ms: 0 };
  let fail!: (e: unknown) => void;
  tx.produce = () => new Promise((_, reject) => (fail = reject));
  const commits = new TransactionalCommits(tx, {
    group: () => ({ generation: 1, destroy: () => {} }),
    owns: () => true,
    topic: "cdr.raw",
    timeoutMs: 10_000,
    now: () => clock.ms,
    deliveryTimeoutMs: 3_000,
  });
  const delivered = commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 }).catch((e: unknown) => e);
  clock.ms += 3_000;
  fail(new KafkaError("KAFKA_DELIVERY", "timed out", -192, "_MSG_TIMED_OUT"));
  expect(((await delivered) as KafkaError).kafkaName).toBe("_MSG_TIMED_OUT");
});

test("an envelope the broker refuses for itself (too large) fails its sender, as without transactions: no transaction helps", async () => {
  const { commits, failNext } = failing(new KafkaError("KAFKA_DELIVERY", "too large", 10, "MSG_SIZE_TOO_LARGE"));
  const delivered = commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 }).catch((e: unknown) => e);
  failNext();
  expect(((await delivered) as KafkaError).kafkaName).toBe("MSG_SIZE_TOO_LARGE");
  expect(await commits.commit(() => [at(0, 1)])).toBe(false);
});

test("an envelope the offsets do not pass is never committed: aborted, and sent again while its partition is owned", async () => {
  const { tx, commits } = setup([0]);
  void commits.produce("dlq", "p0-at-9", {}, { partition: 0, offset: 9 });
  void commits.produce("dlq", "p1-at-3", {}, { partition: 1, offset: 3 }); // partition 1 lost meanwhile
  expect(await commits.commit(() => [at(0, 9)])).toBe(false);
  expect(commits.refusal).toBe("ENVELOPE_PAST_COMMIT"); // partition 0's is still owned: not a loss
  expect(tx.calls).toEqual(["begin", "produce p0-at-9", "produce p1-at-3", "flush", "abort", "begin", "produce p0-at-9"]);
  expect(await commits.commit(() => [at(0, 10)])).toBe(true);
  expect(tx.calls.slice(-3)).toEqual(["flush", "offsets 0@10", "commit"]);
});

test("offsets the group refuses (a stale generation) abort the transaction: a refused commit, its envelopes sent again", async () => {
  const { tx, commits } = setup([0]);
  tx.fail.set("sendOffsets", [refusal("ILLEGAL_GENERATION", "abort")]);
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  expect(await commits.commit(() => [at(0, 2)])).toBe(false);
  expect(commits.refusal).toBe("ILLEGAL_GENERATION");
  expect(tx.calls).toEqual(["begin", "produce e1", "flush", "sendOffsets failed ILLEGAL_GENERATION", "abort", "begin", "produce e1"]);
});

test("a coordinator that answers late is asked again; a producer fenced within the timeout stops the worker with one line naming it", async () => {
  const { tx, commits, clock, renewed } = setup();
  tx.fail.set("commit", [refusal("_TIMED_OUT", "retry"), refusal("_TIMED_OUT", "retry")]);
  expect(await commits.commit(() => [at(0, 1)])).toBe(true);
  expect(tx.calls.filter((c) => c.startsWith("commit"))).toEqual(["commit failed _TIMED_OUT", "commit failed _TIMED_OUT", "commit"]);

  tx.fail.set("commit", [refusal("_FENCED", "fatal")]);
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  clock.ms += 9_999; // open, but not past transaction.timeout.ms: a newer instance fenced it
  const e = await commits.commit(() => [at(0, 2)]).catch((x: unknown) => x);
  expect(renewed).toHaveLength(0);
  expect(e).toBeInstanceOf(TransactionError);
  expect((e as TransactionError).fatal).toBe(true);
  expect((e as Error).message).toStartWith("PRODUCER_FENCED: ");
  expect((e as Error).message).toContain("WORKER_INSTANCE");
  expect((e as Error).message).not.toContain("\n");
});

test("a lost assignment aborts the open transaction and sends none of its envelopes again", async () => {
  const { tx, commits } = setup();
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  await commits.abandon();
  expect(tx.calls).toEqual(["begin", "produce e1", "abort"]);
  expect(await commits.commit(() => [at(0, 0)])).toBe(true);
  expect(tx.calls.slice(3)).toEqual(["begin", "flush", "offsets 0@0", "commit"]);
});

// The simulation's broker-restarts-lost-assignment-requeue: a commit under way when the assignment
// was lost is refused afterwards, once the same partitions came back. Its envelopes are the lost
// assignment's: sent again, they stood beside the ones the new assignment made of the same records.
test("a commit refused after the assignment was lost sends none of that assignment's envelopes again, though the partition came back", async () => {
  const { tx, commits } = setup([0]);
  tx.fail.set("sendOffsets", [refusal("UNKNOWN_MEMBER_ID", "abort")]);
  void commits.produce("dlq", "old", {}, { partition: 0, offset: 1 });
  let abandoned: Promise<void> | null = null;
  tx.duringOffsets = () => (abandoned = commits.abandon()); // the loss, heard while the offsets are on their way
  expect(await commits.commit(() => [at(0, 2)])).toBe(false);
  await abandoned;
  expect(tx.calls).toEqual(["begin", "produce old", "flush", "sendOffsets failed UNKNOWN_MEMBER_ID", "abort"]);
  void commits.produce("dlq", "new", {}, { partition: 0, offset: 1 });
  expect(await commits.commit(() => [at(0, 2)])).toBe(true);
  expect(tx.calls.slice(5)).toEqual(["begin", "produce new", "flush", "offsets 0@2", "commit"]);
});

// The simulation's lost-assignment-envelopes-in-check-commit: a refused commit sent its envelopes
// again while the partitions were still owned; the assignment was lost next, and the new
// assignment's replay check committed (through the transaction) before the abandon could abort
// them. They showed past the check, which had read the DLQ before, and were dead-lettered twice.
test("regression: a commit that reaches the transaction before the abandon does commits none of the lost assignment's envelopes", async () => {
  const { tx, commits } = setup([0]);
  tx.fail.set("sendOffsets", [refusal("UNKNOWN_MEMBER_ID", "abort")]);
  void commits.produce("dlq", "old", {}, { partition: 0, offset: 1 });
  const refused = commits.commit(() => [at(0, 2)]);
  const next = commits.commit(() => [at(0, 2)]); // the next assignment's check, waiting its turn
  expect(await refused).toBe(false); // "old" went again: its partition was still owned
  const abandoned = commits.abandon(); // the loss, heard once the next commit has begun
  expect(await next).toBe(false);
  await abandoned;
  expect(commits.refusal).toBe("PARTITIONS_LOST");
  expect(tx.calls).toEqual(["begin", "produce old", "flush", "sendOffsets failed UNKNOWN_MEMBER_ID", "abort", "begin", "produce old", "flush", "abort"]);
});

// The simulation's crash-kafka-cut-lost-answers-held-envelope: a revocation whose commit the group
// refused (the member had been removed during a cut from the brokers) settled without a loss being
// heard. The abort sent its envelope again while the partition was owned; the revoked partition
// was released, assigned to the same worker again, and its record dead-lettered a second time, both
// envelopes in one transaction.
test("regression: an envelope of a revoked partition released without a commit is never committed; the next commit aborts it", async () => {
  const owned = [0, 1];
  const { tx, commits } = setup(owned);
  tx.fail.set("sendOffsets", [refusal("UNKNOWN_MEMBER_ID", "abort")]);
  void commits.produce("dlq", "old", {}, { partition: 0, offset: 1 });
  void commits.produce("dlq", "kept", {}, { partition: 1, offset: 4 });
  expect(await commits.commit(() => [at(0, 2), at(1, 5)])).toBe(false); // both go again: still owned
  commits.release([0]); // the revocation settled without a commit; partition 0 given up
  void commits.produce("dlq", "new", {}, { partition: 0, offset: 1 }); // assigned again, dead-lettered again
  expect(await commits.commit(() => [at(0, 2), at(1, 5)])).toBe(false);
  expect(commits.refusal).toBe("PARTITIONS_LOST");
  expect(await commits.commit(() => [at(0, 2), at(1, 5)])).toBe(true);
  const shown = tx.calls.slice(tx.calls.lastIndexOf("abort") + 1);
  expect(shown).toEqual(["begin", "produce kept", "produce new", "flush", "offsets 0@2,1@5", "commit"]);
});

// The simulation's kafka-cut-lost-assignment-waiting-envelope: an envelope of the lost assignment
// that was waiting for the transaction to reopen went into the next one, beside the envelope the
// new assignment made of the same record, and both were committed.
test("an envelope that waited for the transaction while the assignment was lost is never sent", async () => {
  const { tx, commits } = setup([0]);
  let waiting: Promise<{ partition: number; offset: number }> | null = null;
  let abandoned: Promise<void> | null = null;
  tx.duringOffsets = () => {
    waiting = commits.produce("dlq", "waiting", {}, { partition: 0, offset: 4 });
    abandoned = commits.abandon();
  };
  expect(await commits.commit(() => [at(0, 4)])).toBe(true);
  await abandoned;
  expect(await waiting!).toEqual({ partition: -1, offset: -1 });
  expect(tx.calls).toEqual(["begin", "flush", "offsets 0@4", "commit"]);
});

// A broker restart or a cut longer than transaction.timeout.ms: the coordinator aborts the open
// transaction and bumps the producer's epoch, which librdkafka reports as fenced (fatal) on the
// next call. Once the worker stopped on it (test/kafka/transaction.test.ts shows the answer).
test("regression: a producer fenced after its transaction outlived the timeout is made again; the envelopes go in its first transaction", async () => {
  const owned = [0, 1];
  const { tx, commits, clock, renewed } = setup(owned);
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  void commits.produce("dlq", "lost", {}, { partition: 1, offset: 7 });
  clock.ms += 10_000;
  tx.fail.set("sendOffsets", [refusal("_FENCED", "fatal")]);
  const refused = commits.commit(() => (owned.pop(), [at(0, 2), at(1, 8)])); // partition 1 lost meanwhile
  expect(await refused).toBe(false);
  expect(commits.refusal).toBe("TRANSACTION_TIMED_OUT");
  expect(commits.renewals).toBe(1);
  expect(tx.calls).toEqual(["begin", "produce e1", "produce lost", "flush", "sendOffsets failed _FENCED", "close"]);
  expect(renewed).toHaveLength(1);
  expect(renewed[0]!.calls).toEqual(["init", "begin", "produce e1"]);
  expect(await commits.commit(() => [at(0, 2)])).toBe(true);
  expect(renewed[0]!.calls.slice(3)).toEqual(["flush", "offsets 0@2", "commit"]);
});

test("an abort that meets the timed-out fencing makes the producer again too", async () => {
  const { tx, commits, clock, renewed } = setup([0]);
  tx.fail.set("sendOffsets", [refusal("ILLEGAL_GENERATION", "abort")]);
  tx.fail.set("abort", [refusal("_FENCED", "fatal")]);
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  clock.ms += 12_000;
  expect(await commits.commit(() => [at(0, 2)])).toBe(false);
  expect(tx.calls.slice(-3)).toEqual(["sendOffsets failed ILLEGAL_GENERATION", "abort failed _FENCED", "close"]);
  expect(renewed[0]!.calls).toEqual(["init", "begin", "produce e1"]);
});

// The cluster's broker kill -9: the abort after a timed-out send was refused INVALID_TXN_STATE,
// which librdkafka makes fatal; the worker stopped.
test("regression: a producer failed for good otherwise than fenced (INVALID_TXN_STATE) is made again at once, whatever its transaction's age", async () => {
  const { tx, commits, renewed } = setup([0]);
  tx.fail.set("sendOffsets", [refusal("ILLEGAL_GENERATION", "abort")]);
  tx.fail.set("abort", [refusal("INVALID_TXN_STATE", "fatal")]);
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  expect(await commits.commit(() => [at(0, 2)])).toBe(false);
  expect(tx.calls.slice(-3)).toEqual(["sendOffsets failed ILLEGAL_GENERATION", "abort failed INVALID_TXN_STATE", "close"]);
  expect(renewed[0]!.calls).toEqual(["init", "begin", "produce e1"]);
  expect(commits.renewals).toBe(1);
});

test("a transaction holds at most MAX_TRANSACTION_ENVELOPES: the next envelope waits for the next transaction", async () => {
  const { tx, commits } = setup();
  const sends = Array.from({ length: MAX_TRANSACTION_ENVELOPES + 5 }, (_, i) => commits.produce("dlq", `e${i}`, {}, { partition: 0, offset: i }));
  await Bun.sleep(0);
  const produced = () => tx.calls.filter((c) => c.startsWith("produce ")).length;
  expect(produced()).toBe(MAX_TRANSACTION_ENVELOPES);
  expect(await commits.commit(() => [at(0, MAX_TRANSACTION_ENVELOPES)])).toBe(true);
  // The waiting five join the next transaction, once the full one has committed.
  await waitFor(() => (produced() === MAX_TRANSACTION_ENVELOPES + 5 ? true : undefined), 5_000, "the rest produced");
  expect(tx.calls.indexOf("commit")).toBeLessThan(tx.calls.lastIndexOf(`produce e${MAX_TRANSACTION_ENVELOPES}`));
  expect(await commits.commit(() => [at(0, MAX_TRANSACTION_ENVELOPES + 5)])).toBe(true);
  await Promise.all(sends);
});

test("envelopes that wait for room join in the order they came, one called during a commit behind them: none lies past the commit", async () => {
  const { tx, commits } = setup();
  const sends = Array.from({ length: MAX_TRANSACTION_ENVELOPES }, (_, i) => commits.produce("dlq", `e${i}`, {}, { partition: 0, offset: i }));
  const waiting = commits.produce("dlq", "waiting", {}, { partition: 0, offset: MAX_TRANSACTION_ENVELOPES });
  // Called while the full transaction is being committed (closed to new envelopes).
  let later: Promise<unknown> | null = null;
  tx.duringOffsets = () => (later = commits.produce("dlq", "later", {}, { partition: 0, offset: MAX_TRANSACTION_ENVELOPES + 1 }));
  expect(await commits.commit(() => [at(0, MAX_TRANSACTION_ENVELOPES)])).toBe(true);
  await waitFor(() => (tx.calls.includes("produce later") ? true : undefined), 5_000, "the later envelope produced");
  expect(tx.calls.indexOf("produce waiting")).toBeLessThan(tx.calls.indexOf("produce later"));
  expect(await commits.commit(() => [at(0, MAX_TRANSACTION_ENVELOPES + 2)])).toBe(true);
  expect(tx.calls.filter((c) => c === "abort")).toEqual([]);
  await Promise.all([...sends, waiting, later]);
});

test("a transaction holds at most MAX_TRANSACTION_BYTES of envelopes: large ones wait for the next", async () => {
  const { tx, commits } = setup();
  const MiB = 1 << 20;
  const big = (i: number) => `${i}`.padEnd(MiB, "x");
  const count = MAX_TRANSACTION_BYTES / MiB + 8;
  const sends = Array.from({ length: count }, (_, i) => commits.produce("dlq", big(i), {}, { partition: 0, offset: i }));
  await Bun.sleep(0);
  const produced = () => tx.calls.filter((c) => c.startsWith("produce ")).length;
  expect(produced()).toBe(MAX_TRANSACTION_BYTES / MiB);
  expect(await commits.commit(() => [at(0, MAX_TRANSACTION_BYTES / MiB)])).toBe(true);
  await waitFor(() => (produced() === count ? true : undefined), 5_000, "the rest produced");
  expect(await commits.commit(() => [at(0, count)])).toBe(true);
  await Promise.all(sends);
});

// The commit was asked and no answer came (the call stuck, or fatal): the coordinator may have
// written it. The new producer's init settles it; the group's offsets then say which, by the nonce
// the commit's metadata carried. Sent again only when it did not commit: a copy would commit too.
test.each([
  ["committed", true],
  ["aborted", false],
])("a commit whose answer was lost and that %s is learned from the group's offsets before anything goes again", async (_what, landed) => {
  let carried: readonly TopicPartition[] = [];
  const reads: number[][] = [];
  const { tx, commits, renewed } = setup([0, 1], async (partitions) => {
    reads.push([...partitions]);
    if (reads.length === 1) throw new KafkaError("KAFKA_CLIENT", "committed", 88, "UNSTABLE_OFFSET_COMMIT", true);
    return landed ? carried : carried.map((o) => ({ ...o, metadata: commitMetadata(0, true) }));
  });
  void commits.produce("dlq", "e1", {}, { partition: 0, offset: 1 });
  void commits.produce("dlq", "e7", {}, { partition: 1, offset: 7 });
  tx.duringOffsets = () => (carried = tx.sentOffsets);
  tx.fail.set("commit", [refusal("_TIMED_OUT", "fatal")]);
  expect(await commits.commit(() => [{ ...at(0, 2), metadata: commitMetadata(5, true) }, at(1, 8)])).toBe(landed);
  expect(carried.map((o) => readCommitNonce(o.metadata))).toEqual([expect.any(String), expect.any(String)]);
  expect(readCommitMetadata(carried[0]!.metadata)).toEqual({ since: 5, transactional: true });
  expect(reads).toEqual([[0, 1], [0, 1]]); // read again until it answered
  expect(renewed[0]!.calls).toEqual(landed ? ["init"] : ["init", "begin", "produce e1", "produce e7"]);
});
