// Scale-out under both consumer group protocols librdkafka 2.15 speaks to Kafka 4: the classic one
// and KIP-848's (`group.protocol=consumer`, rebalances driven by the broker, incremental).
// Two workers split the partitions, a third joins while records stream in; every revoked
// partition is flushed and committed before it goes, so nothing is lost and nothing is inserted twice.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, header, readCommitted } from "../support/kafka.ts";
import { waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names, distinctIds } = e2eScope();

describe("consumer group protocols", () => {
  for (const protocol of ["classic", "consumer"] as const) {
    test(`group.protocol=${protocol}: two workers split the partitions, a third joins under load; nothing lost, nothing inserted twice`, async () => {
      const n = await names(`gp-${protocol}`);
      // The classic protocol takes session timeouts from the client; the consumer protocol from the broker.
      const env = workerEnv(n, { KAFKA_PROP_GROUP_PROTOCOL: protocol, BATCH_SIZE: "500", ...(protocol === "classic" ? { KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" } : {}) });
      const a = await startWorker(env);
      const b = await startWorker(env);
      const owned = async (w: typeof a) => (await w.stats()).assigned_partitions as number[];
      const split = async (...ws: Array<typeof a>) => {
        const parts = await Promise.all(ws.map(owned));
        return parts.every((p) => p.length > 0) && new Set(parts.flat()).size === 3 && parts.flat().length === 3 ? true : undefined;
      };
      await waitFor(() => split(a, b), 30_000, "two workers sharing 3 partitions");
      let valid = 0, invalid = 0, total = 0, round = 0;
      let joined = false, thirdConsumed = false;
      // Records stream in the whole time: before the third worker joins, while it joins, and until
      // it has consumed from the partition it was given (the consumer protocol hands it over at a heartbeat).
      const streaming = (async () => {
        while (!(joined && thirdConsumed) && round < 200) {
          const r = await produceSynthetic(n.raw, 3000, 0.03, 100 + round++);
          valid += r.valid; invalid += r.invalid; total += 3000;
          await Bun.sleep(100);
        }
      })();
      await waitFor(() => (round >= 3 ? true : undefined), 30_000, "a stream under way");
      const c = await startWorker(env);
      await waitFor(() => split(a, b, c), 30_000, "three workers owning one partition each");
      joined = true;
      await statsWhen(c, (s) => s.total_consumed > 0, 30_000, "the third worker consumed");
      thirdConsumed = true;
      await streaming;
      await waitFor(async () => ((await distinctIds(n)) === valid ? true : undefined), 60_000, "every valid record stored");
      const committed = async () => [...committedOffsets(n.group, n.raw, 3).values()].reduce((s, o) => s + (o > 0n ? o : 0n), 0n);
      await waitFor(async () => ((await committed()) === BigInt(total) ? true : undefined), 30_000, "every offset committed");
      const cStats = await statsWhen(c!, (s) => s.total_consumed > 0, 10_000, "the third worker consumed");
      expect(cStats.total_consumed).toBeGreaterThan(0);
      expect([await a.stop(), await b.stop(), await c.stop()]).toEqual([0, 0, 0]);
      const rs = await ch.query({ query: `SELECT count() AS rows, uniqExact(cdr_id) AS ids FROM ${n.database}.${n.table}`, format: "JSONEachRow" });
      expect(await rs.json()).toEqual([{ rows: String(valid), ids: String(valid) }]);
      const dlq = await readCommitted(n.dlq);
      expect(new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`)).size).toBe(invalid);
      expect(dlq.length).toBe(invalid);
    }, 120_000);
  }
});
