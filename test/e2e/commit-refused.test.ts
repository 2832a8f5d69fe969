// A commit the group refuses because it rebalanced is no commit failure (DECISIONS "Commits and
// rebalances"): the worker drops what it lost, sends the commit again for what it still owns, and
// goes on. Forced for real, not left to luck: one worker of two is frozen (SIGSTOP) past its
// session timeout while records stream in, so the group moves its partitions; thawed, its first
// commit carries a membership the group no longer knows (UNKNOWN_MEMBER_ID or
// ILLEGAL_GENERATION; FENCED_MEMBER_EPOCH under KIP-848). Under cooperative-sticky and under the
// consumer protocol, with a worker joining under load: no worker exits nonzero, nothing is lost.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { e2eScope } from "../support/e2e.ts";
import { committedOffsets, header, readCommitted } from "../support/kafka.ts";
import { waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, statsWhen, workerEnv, type RunningWorker } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, distinctIds } = e2eScope();

// The classic protocol takes the session timeout from the client; the consumer protocol from the
// broker (group.consumer.session.timeout.ms, 6 s on the test brokers: scripts/kafka/server.properties).
const PROTOCOLS = [
  ["classic, cooperative-sticky", { KAFKA_PROP_PARTITION_ASSIGNMENT_STRATEGY: "cooperative-sticky", KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" }],
  ["consumer (KIP-848)", { KAFKA_PROP_GROUP_PROTOCOL: "consumer" }],
] as const;

describe("commits refused during a rebalance", () => {
  for (const [protocol, props] of PROTOCOLS) {
    test(`${protocol}: a worker frozen past its session, thawed while a third joins under load, goes on; nothing lost`, async () => {
      const n = await names("refused");
      const env = workerEnv(n, { ...props, BATCH_SIZE: "500", BATCH_FLUSH_INTERVAL_SECONDS: "0.5" });
      const a = await startWorker(env);
      const b = await startWorker(env);
      const workers: RunningWorker[] = [a, b];
      const owned = async (w: RunningWorker) => ((await w.stats()).assigned_partitions as number[]).length;
      await waitFor(async () => ((await owned(a)) > 0 && (await owned(b)) > 0 ? true : undefined), 30_000, "two workers sharing 3 partitions");
      let valid = 0, invalid = 0, total = 0, round = 0, streaming = true;
      const stream = (async () => {
        while (streaming && round < 300) {
          const r = await produceSynthetic(n.raw, 1000, 0.03, 200 + round++);
          valid += r.valid; invalid += r.invalid; total += 1000;
          await Bun.sleep(50);
        }
      })();
      try {
        await statsWhen(a, (s) => s.commits > 0 && s.buffered_rows > 0, 30_000, "worker a committing with rows in hand");
        a.proc.kill("SIGSTOP");
        // Past the session: the group gives a's partitions to b.
        await waitFor(async () => ((await owned(b)) === 3 ? true : undefined), 30_000, "b owns every partition");
        a.proc.kill("SIGCONT");
        workers.push(await startWorker(env));
        // Thawed, a either has a commit refused, or first hears that its assignment was lost and
        // drops what it held (test/e2e/zombie.test.ts): either way it goes on.
        const thawed = await statsWhen(a, (s) => s.commits_refused > 0 || s.assignments_lost > 0, 30_000, "a's commit refused or its assignment lost");
        expect(thawed.commits_refused + thawed.assignments_lost).toBeGreaterThan(0);
        const codes = a.logs.filter((l) => l.includes('"commit refused')).map((l) => JSON.parse(l).code as string);
        expect(codes.length > 0 || thawed.assignments_lost > 0).toBe(true);
        // Under exactly-once a transaction holding envelopes of partitions lost meanwhile is aborted too.
        for (const c of codes) expect(["REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH", "PARTITIONS_LOST"]).toContain(c);
        console.log(`${protocol}: refused with ${[...new Set(codes)].join(", ") || "none"}, assignments lost ${thawed.assignments_lost}`);
        await Bun.sleep(2000);
      } finally {
        streaming = false;
        a.proc.kill("SIGCONT");
        await stream;
      }
      for (const w of workers) expect(w.proc.exitCode).toBeNull(); // none stopped on a refused commit
      await waitFor(async () => ((await distinctIds(n)) === valid ? true : undefined), 60_000, "every valid record stored");
      const committed = async () => [...committedOffsets(n.group, n.raw, 3).values()].reduce((s, o) => s + (o > 0n ? o : 0n), 0n);
      await waitFor(async () => ((await committed()) === BigInt(total) ? true : undefined), 60_000, "every offset committed");
      expect(await Promise.all(workers.map((w) => w.stop()))).toEqual(workers.map(() => 0));
      const dlq = await readCommitted(n.dlq);
      expect(new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`)).size).toBe(invalid);
    }, 150_000);
  }
});
