// scripts/librdkafka/patches/coordinator-timeout.patch, on librdkafka's own mock cluster: the one
// place a group coordinator can be taken down at a chosen instant. Unpatched, a TxnOffsetCommit
// that waits for a coordinator which went down waits for ever, and send_offsets_to_transaction with
// it (librdkafka issue #5456): the cluster's broker kill -9 left a worker's commit hanging there,
// with the partitions' lag growing and nothing logged. The broker's side of transactions is
// test/kafka/transaction.test.ts.
import type { Pointer } from "bun:ffi";
import { expect, setDefaultTimeout, test } from "bun:test";
import { cstr } from "../../src/kafka/native.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { GroupMetadata, TransactionError, Transactions } from "../../src/kafka/transaction.ts";
import { mockControls } from "../support/mock-cluster.ts";

setDefaultTimeout(60_000);

test("regression: send_offsets_to_transaction returns, refused, when the group coordinator goes down, instead of waiting for ever", async () => {
  const mock = mockControls();
  const txnId = "coordinator-timeout-txn", group = "coordinator-timeout-group";
  const producer = new Producer({ "test.mock.num.brokers": "3", "transactional.id": txnId, "transaction.timeout.ms": "10000" });
  const txn = new Transactions(producer);
  try {
    const cluster = mock.rd_kafka_handle_mock_cluster(producer.handle) as Pointer;
    expect(cluster).toBeTruthy();
    // Different coordinators, so that only the group's goes down.
    expect(mock.rd_kafka_mock_coordinator_set(cluster, cstr("group"), cstr(group), 1)).toBe(0);
    expect(mock.rd_kafka_mock_coordinator_set(cluster, cstr("transaction"), cstr(txnId), 2)).toBe(0);
    await txn.init(10_000);
    txn.begin();
    expect(mock.rd_kafka_mock_broker_set_down(cluster, 1)).toBe(0);

    const metadata = new GroupMetadata(mock.rd_kafka_consumer_group_metadata_new(cstr(group)) as Pointer);
    const started = performance.now();
    const sent = txn.sendOffsets([{ topic: "cdr.raw", partition: 0, offset: 5n }], metadata, 3_000);
    // Unpatched it never settles: bounded here so that the test says so instead of timing out.
    const outcome = await Promise.race([
      sent.then(
        () => "committed",
        (e: unknown) => e,
      ),
      Bun.sleep(30_000).then(() => "still waiting after 30 s"),
    ]);
    const waited = performance.now() - started;
    metadata.destroy();
    expect(outcome).toBeInstanceOf(TransactionError);
    // The transaction cannot go on: aborted, its envelopes go again in the next (transactional-commits.ts).
    expect((outcome as TransactionError).abortable || (outcome as TransactionError).retryable).toBe(true);
    expect(waited).toBeLessThan(15_000);
  } finally {
    producer.close();
  }
});
