// Exactly-once across a crash, on ClickHouse 18.16 and on the 26.9 engine: a partition's new owner
// skips what its last owner stored or dead-lettered past the committed offset. The last owner's
// state is made as a worker killed with kill -9 leaves it (rows and envelopes delivered, the commit
// behind them, with the metadata every commit carries), so the replay is certain, not left to the
// moment of a kill; at-least-once on the same state stores the replay again (the control).
// scripts/chaos/kill-loop.ts does the same with real kills at random moments.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { payloadDigest, ProvenanceKey, SOURCE_MAC_VERSION } from "../../src/dlq/provenance-mac.ts";
import { DlqPublisher } from "../../src/dlq/publisher.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { commitMetadata } from "../../src/delivery/offsets/commit-metadata.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, committedOffsets, props } from "../support/kafka.ts";
import { CLICKHOUSE_SERVERS, ROOT } from "../support/services.ts";
import { startWorker, statsWhen, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const N = 100;
const INVALID = new Set([15, 40, 45, 70]);
const COMMITTED = 20; // the last owner's commit: 0…19 done
const DELIVERED_UP_TO = 60; // …and 20…59 delivered after it, not committed when it died
const values = Array.from({ length: N }, (_, i) => (INVALID.has(i) ? `{"broken": ${i}` : toJson(withFields({ raw_id: `eo-${i}` }))));
const validBelow = (k: number) => [...Array(k).keys()].filter((i) => !INVALID.has(i)).length;
const invalidBelow = (k: number) => [...INVALID].filter((i) => i < k).length;

/** Offsets 0…59 delivered as the last owner delivered them, 0…19 committed: then it was killed. */
/** What a worker of these names binds its MACs to beside the source. */
const scopeOf = (n: Names) => ({ group: n.group, dlqTopic: n.dlq, table: `${n.database}.${n.table}` });

async function lastOwnerKilled(n: Names, ch: ReturnType<typeof e2eScope>["ch"], key?: string): Promise<void> {
  const producer = new Producer(props);
  try {
    await Promise.all(values.map((v) => producer.produce(n.raw, v, { partition: 0 })));
    const since = Date.now(); // when offset 20 was consumed
    const ctx = { phone: new PhoneNormalizer() };
    const body = new RowBinaryBuffer();
    const dlq = new DlqPublisher(producer, {
      topic: n.dlq,
      workerInstance: "killed",
      storageFailureReason: "normalization_error",
      ...(key ? { key: new ProvenanceKey(key, scopeOf(n)) } : {}),
    });
    let rows = 0;
    for (let i = 0; i < DELIVERED_UP_TO; i++) {
      const d = decode(new TextEncoder().encode(values[i]!), ctx);
      if (d.ok) {
        body.add(d.row, Math.floor(since / 1000), 0, i);
        rows++;
      } else await dlq.publishRejection(d.rejection, { topic: n.raw, partition: 0, offset: i });
    }
    await new ClickHouseWriter(ch, n.database, n.table).insert(body.bytes(), rows);
    const group = new Consumer({ props: { ...props, "group.id": n.group }, topics: [] });
    try {
      await group.commit([{ topic: n.raw, partition: 0, offset: BigInt(COMMITTED), metadata: commitMetadata(since) }]);
    } finally {
      await group.close();
    }
  } finally {
    producer.close();
  }
}

describe.each(CLICKHOUSE_SERVERS.map((s) => [s.name, e2eScope(s.url)] as const))("Exactly-once on %s", (_name, { ch, names }) => {
  const count = async (n: Names, q: string) =>
    Number((await (await ch.query({ query: q.replaceAll("{t}", `${n.database}.${n.table}`), format: "JSONEachRow" })).json<{ c: string }>())[0]!.c);

  for (const delivery of ["exactly-once", "at-least-once"] as const) {
    const replayed = validBelow(DELIVERED_UP_TO) - validBelow(COMMITTED);
    const replayedDlq = invalidBelow(DELIVERED_UP_TO) - invalidBelow(COMMITTED);
    test(
      delivery === "exactly-once"
        ? "a new owner skips the rows and envelopes its killed predecessor delivered past its commit: every record once, counted without FINAL"
        : "DELIVERY=at-least-once on the same state stores that replay again (the control: the skip is the check's doing)",
      async () => {
        const n = await names(delivery === "exactly-once" ? "eo" : "alo");
        await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` }); // no collapse behind the count's back
        await lastOwnerKilled(n, ch);
        const w = await startWorker(workerEnv(n, { DELIVERY: delivery }));
        const s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === N, 30_000, "every offset committed");
        expect(await w.stop()).toBe(0);
        const rows = await count(n, "SELECT count() AS c FROM {t}");
        const records = await count(n, "SELECT uniqExact(kafka_partition, kafka_offset) AS c FROM {t}");
        // What the worker did, should a count be off: its check, its inserts.
        if (rows !== (delivery === "exactly-once" ? validBelow(N) : validBelow(N) + replayed))
          console.log(w.logs.filter((l) => /replay|insert|ClickHouse|assigned|revoked/i.test(l)).join("\n"));
        expect(records).toBe(validBelow(N));
        expect(s.delivery).toBe(delivery);
        if (delivery === "exactly-once") {
          expect(rows).toBe(validBelow(N));
          expect((await committedCount(n.dlq))).toBe(INVALID.size);
          expect(s.replays_skipped).toBe(replayed + replayedDlq);
          expect(s.replay_checks).toBe(1);
          expect(s.total_consumed).toBe(N - COMMITTED - replayed - replayedDlq);
          expect(w.logs.some((l) => l.includes("replay check done") && l.includes(`"delivered":${replayed + replayedDlq}`))).toBe(true);
        } else {
          expect(rows).toBe(validBelow(N) + replayed);
          expect((await committedCount(n.dlq))).toBe(INVALID.size + replayedDlq);
          expect(s.replays_skipped).toBe(0);
        }
      },
    );
  }

  // The offsets table can lack rows the table holds: its view writes after the table, and can fail
  // there. Read alone, it let a new owner store the last owner's rows again.
  test("regression: the offsets table lacks the last owner's rows (its view failed): the new owner finds them in the table and stores none twice", async () => {
    const n = await names("eo-view");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await lastOwnerKilled(n, ch);
    await ch.command({ query: `TRUNCATE TABLE ${n.database}.${n.table}_offsets` });
    const w = await startWorker(workerEnv(n));
    await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === N, 30_000, "every offset committed");
    expect(await w.stop()).toBe(0);
    const replayed = validBelow(DELIVERED_UP_TO) - validBelow(COMMITTED);
    expect(await count(n, "SELECT count() AS c FROM {t}")).toBe(validBelow(N));
    expect(await count(n, "SELECT uniqExact(kafka_partition, kafka_offset) AS c FROM {t}")).toBe(validBelow(N));
    const lookups = w.logs.filter((l) => l.includes("rows a partition's last owner may have stored were looked up"));
    expect(lookups.reduce((sum, l) => sum + (JSON.parse(l) as { stored: number }).stored, 0)).toBe(replayed);
    expect((await committedCount(n.dlq))).toBe(INVALID.size);
  });

  test("with DLQ_PROVENANCE_KEY the predecessor's envelopes are skipped and forged ones are not: every record once, none missing", async () => {
    const KEY = "exactly-once-test-provenance-key";
    const n = await names("eo-mac");
    await ch.command({ query: `SYSTEM STOP MERGES ${n.database}.${n.table}` });
    await lastOwnerKilled(n, ch, KEY);
    // Whoever may write to the DLQ: envelopes naming valid records 60…64 that nobody delivered, without
    // a MAC, and two for 65: a MAC of another key, and one of the worker's key made for another group
    // (workers of two groups sharing the topics and the key). Taken as true, they would make the
    // worker skip them.
    const forger = new Producer(props);
    try {
      const source = (o: number): Array<[string, string]> => [[HEADERS.sourceTopic, n.raw], [HEADERS.sourcePartition, "0"], [HEADERS.sourceOffset, String(o)]];
      for (let o = 60; o < 65; o++) await forger.produce(n.dlq, "{}", { headers: source(o) });
      const digest = payloadDigest(values[65]!);
      const signed = (mac: string): Array<[string, string]> => [[HEADERS.sourceDigest, digest], [HEADERS.sourceMac, mac], [HEADERS.macVersion, SOURCE_MAC_VERSION]];
      const mac = new ProvenanceKey("not-the-workers-key-at-all-00000", scopeOf(n)).sign(n.raw, 0, 65, digest);
      await forger.produce(n.dlq, "{}", { headers: [...source(65), ...signed(mac)] });
      const otherGroup = new ProvenanceKey(KEY, { ...scopeOf(n), group: `${n.group}-other` }).sign(n.raw, 0, 65, digest);
      await forger.produce(n.dlq, "{}", { headers: [...source(65), ...signed(otherGroup)] });
      // And a genuine envelope (the worker's key) of another record at offset 66: a topic made again.
      const other = payloadDigest(values[0]!);
      const proof = new ProvenanceKey(KEY, scopeOf(n)).sign(n.raw, 0, 66, other);
      await forger.produce(n.dlq, "{}", { headers: [...source(66), [HEADERS.sourceDigest, other], [HEADERS.sourceMac, proof], [HEADERS.macVersion, SOURCE_MAC_VERSION]] });
    } finally {
      forger.close();
    }
    const w = await startWorker(workerEnv(n, { DLQ_PROVENANCE_KEY: KEY }));
    const s = await statsWhen(w, (s) => s.partitions["0"]?.committed_offset === N, 30_000, "every offset committed");
    expect(await w.stop()).toBe(0);
    expect(await count(n, "SELECT count() AS c FROM {t}")).toBe(validBelow(N));
    expect(await count(n, "SELECT uniqExact(kafka_partition, kafka_offset) AS c FROM {t}")).toBe(validBelow(N));
    const replayed = validBelow(DELIVERED_UP_TO) - validBelow(COMMITTED);
    const replayedDlq = invalidBelow(DELIVERED_UP_TO) - invalidBelow(COMMITTED);
    expect(s.replays_skipped).toBe(replayed + replayedDlq);
    expect(s.replay_envelopes_unproven).toBe(7);
    expect(s.replay_envelopes_mismatched).toBe(1);
    // The audit sees the same: the seven unproven and the mismatched one reported apart, none counted
    // as a record's envelope, so no record looks both stored and dead-lettered.
    const audit = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "audit", "--partitions", "0"], {
      env: workerEnv(n, { LOG_LEVEL: "warn", DLQ_PROVENANCE_KEY: KEY }), stdout: "pipe", stderr: "pipe",
    });
    const summary = JSON.parse(audit.stdout.toString().trim().split("\n").at(-1)!);
    expect({ code: audit.exitCode, stderr: audit.stderr.toString() }).toEqual({ code: 0, stderr: "" });
    expect(summary).toMatchObject({ audit: "clean", missing: 0, stored_and_dead_lettered: 0, unproven_envelopes: 7, mismatched_envelopes: 1 });
  });

  test("a group's first owner marks each partition's start before it delivers anything, so that a kill before its first commit can be checked", async () => {
    const n = await names("eofirst");
    const w = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "3600" }));
    await statsWhen(w, (s) => s.replay_checks === 1 && s.replay_checks_pending === 0, 20_000, "replay check done");
    const metadata = (() => {
      const c = new Consumer({ props: { ...props, "group.id": n.group }, topics: [] });
      try {
        return c.committed([0, 1, 2].map((partition) => ({ topic: n.raw, partition })));
      } finally {
        void c.close();
      }
    })();
    expect(metadata.map((m) => [m.offset, JSON.parse(m.metadata!).cdr_worker])).toEqual([[0n, 1], [0n, 1], [0n, 1]]);
    expect([...committedOffsets(n.group, n.raw, 3).values()]).toEqual([0n, 0n, 0n]);
    expect(await w.stop()).toBe(0);
  });
});
