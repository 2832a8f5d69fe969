// A raw topic written by a transactional producer: each commit leaves a marker at an offset of its
// own, after the last record. The worker commits past it once every record before it is durable,
// so a quiet partition shows no lag (it stayed at 1 for ever, the marker uncommitted).
import { expect, setDefaultTimeout, test } from "bun:test";
import { Producer } from "../../src/kafka/producer.ts";
import { Transactions } from "../../src/kafka/transaction.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, props } from "../support/kafka.ts";
import { waitFor } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts } = e2eScope();

test("records of a committed transaction, then quiet: the commit passes the marker, and the lag is 0", async () => {
  const n = await names("txn-source");
  const producer = new Producer({ ...props, "transactional.id": `${n.group}-source` });
  const txn = new Transactions(producer);
  try {
    await txn.init(30_000);
    txn.begin();
    for (let i = 0; i < 10; i++) await txn.produce(n.raw, toJson(withFields({ raw_id: `txn-${i}` })), { partition: 0 });
    await txn.commit(30_000);
  } finally {
    txn.close();
  }
  const w = await startWorker(workerEnv(n));
  try {
    await statsWhen(w, (s) => s.total_clickhouse === 10 && s.in_flight_buffer === 0, 30_000, "every record stored");
    // Records 0-9 and the commit marker at 10: the partition's end is 11.
    await waitFor(() => (committedOffsets(n.group, n.raw, 1).get(0) === 11n ? true : undefined), 20_000, "the commit past the marker");
    const s = await statsWhen(w, (s) => s.partitions?.["0"]?.lag === 0, 20_000, "no lag on the quiet partition");
    expect(s.partitions["0"].lag).toBe(0);
    expect((await fetch(`${w.statsUrl}/readyz`)).status).toBe(200);
    expect((await storedCounts(n)).rows).toBe(10);
  } finally {
    expect(await w.stop()).toBe(0);
  }
}, 90_000);
