// A transactional call whose thread never returns (librdkafka waiting for a coordinator that does
// not come) is given up at its limit: the error is fatal, so the commits make the producer again
// (delivery/offsets/transactional-commits.ts) instead of waiting for ever with nothing logged. The
// thread is a stand-in here; the producer is real, on the test broker.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { TransactionError, Transactions } from "../../src/kafka/transaction.ts";
import type { TxnThread } from "../../src/kafka/txn-thread.ts";
import { props } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

test("regression: a transactional call that never returns fails for good at its limit, and the state says so", async () => {
  const producer = new Producer({ ...props, "transactional.id": uniqueName("stuck-call") });
  const calls: number[] = [];
  const never: TxnThread = { call: (_fn, _rk, timeoutMs) => (calls.push(timeoutMs), new Promise(() => {})) };
  const txn = new Transactions(producer, { thread: never, stuckAfterMs: 300 });
  try {
    const started = performance.now();
    const e = await txn.init(1_000).catch((x: unknown) => x);
    const waited = performance.now() - started;
    expect(calls).toEqual([1_000]);
    expect(e).toBeInstanceOf(TransactionError);
    expect([(e as TransactionError).fatal, (e as TransactionError).kafkaName]).toEqual([true, "_TIMED_OUT"]);
    expect((e as Error).message).toContain("no answer within 300 ms");
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(5_000);
    expect(txn.state).toBe("failed");
  } finally {
    producer.close();
  }
});
