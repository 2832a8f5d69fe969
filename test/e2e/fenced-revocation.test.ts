// A member fenced while it settles a revocation (KIP-848): worker A owns every partition, its
// ClickHouse goes away (CH_UNREACHABLE_POLICY=wait), and B joins. The broker asks A to give one
// partition up, which A cannot settle without ClickHouse; after max.poll.interval.ms the broker fences
// A and gives B everything. librdkafka defers the fence while A's revocation is pending, and stops
// heartbeating, so A's sends wait for a lease no heartbeat renews: A must hear the refusal itself,
// drop what it held, and rejoin. Then every record is stored once, and both workers stop cleanly.
import { expect, setDefaultTimeout, test } from "bun:test";
import { e2eScope } from "../support/e2e.ts";
import { alterGroupConfig } from "../support/kafka.ts";
import { dlqCount, reportScenario, stallMeter, storedFigures } from "../support/scenario-meter.ts";
import { waitFor, CLICKHOUSE_URL } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names, storedCounts } = e2eScope();

// Beside it, finding the same member frozen (SIGSTOP) through the fence: its ClickHouse answers again
// while it is frozen, so on thawing it would send what it held, were a refused heartbeat taken for a
// proof of membership. Counted as billing counts: no row twice.
// Under cooperative-sticky (classic protocol) A frozen past its session is removed from the group:
// the same loss, heard the classic way.
// Unfrozen, it is not fenced there: the group is stable once A has been told what to give up.
// Under KIP-848 at the broker's default session (45 s) too, where the lease after the last accepted
// heartbeat (40.5 s) outlasts the fence at the rebalance timeout: the revocation's start bounds it.
const PROTOCOLS: Array<{ name: string; fenced: boolean; env: Record<string, string>; groupSessionMs?: number }> = [
  { name: "consumer (KIP-848)", fenced: true, env: { KAFKA_PROP_GROUP_PROTOCOL: "consumer" } },
  { name: "consumer (KIP-848), a 45 s session", fenced: true, env: { KAFKA_PROP_GROUP_PROTOCOL: "consumer" }, groupSessionMs: 45_000 },
  {
    name: "cooperative-sticky",
    fenced: false,
    env: { KAFKA_PROP_PARTITION_ASSIGNMENT_STRATEGY: "cooperative-sticky", KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" },
  },
];

const title = (fenced: boolean, frozen: boolean) =>
  fenced || frozen
    ? `a worker fenced while its revocation waits for ClickHouse${frozen ? ", frozen through the fence," : ""} drops what it held, rejoins,`
    : "a worker whose revocation waits for ClickHouse hands the partition over once it is back";

for (const protocol of PROTOCOLS)
for (const frozen of protocol.groupSessionMs ? [false] : [false, true])
  test(`${protocol.name}: ${title(protocol.fenced, frozen)} and stops cleanly; every record once`, async () => {
    const n = await names("fenced");
    if (protocol.groupSessionMs) await alterGroupConfig(n.group, { "consumer.session.timeout.ms": protocol.groupSessionMs });
    const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
    const shared = {
      ...protocol.env,
      KAFKA_PROP_MAX_POLL_INTERVAL_MS: "15000",
      CH_UNREACHABLE_POLICY: "wait",
      BATCH_SIZE: "500",
      BATCH_FLUSH_INTERVAL_SECONDS: "0.5",
    };
    const a = await startWorker(workerEnv(n, { ...shared, CLICKHOUSE_URL: proxy.url, CLICKHOUSE_REQUEST_TIMEOUT_MS: "1000", CLICKHOUSE_KEEP_ALIVE_IDLE_MS: "0" }));
    let b: Awaited<ReturnType<typeof startWorker>> | null = null;
    let valid = 0;
    const produce = async (seed: number) => (valid += (await produceSynthetic(n.raw, 3000, 0.03, seed)).valid);
    let meter: ReturnType<typeof stallMeter> | null = null;
    try {
      await produce(1);
      await statsWhen(a, (s) => s.assigned_partitions.length === 3 && s.total_clickhouse > 0, 30_000, "a storing, owning every partition");
      meter = stallMeter(ch, n);
      proxy.down();
      await produce(2);
      await statsWhen(a, (s) => s.buffered_rows > 0, 30_000, "a holding rows it cannot store");
      b = await startWorker(workerEnv(n, shared));
      if (frozen) {
        const revoking = (s: Record<string, any>) =>
          Object.values(s.partitions as Record<string, { paused_by: string[] }>).some((p) => p.paused_by.includes("revoke"));
        await statsWhen(a, revoking, 30_000, "a settling a revocation");
        a.proc.kill("SIGSTOP");
        proxy.up();
      }
      if (frozen) {
        // The broker fences A once its revocation has waited max.poll.interval.ms, and gives B all.
        await statsWhen(b, (s) => s.assigned_partitions.length === 3, 60_000, "b owns every partition");
        await Bun.sleep(3_000);
        a.proc.kill("SIGCONT");
      }
      if (protocol.fenced || frozen) {
        // Fenced, A declares the loss; it rejoins and may own partitions again (at once on some brokers,
        // before B was ever given all), holding new rows while its ClickHouse is away.
        const lost = await statsWhen(a, (s) => s.assignments_lost > 0, 60_000, "a declares its assignment lost");
        expect(lost.assignments_lost).toBeGreaterThan(0);
      } else {
        // The classic group is stable once A has been told what to give up: A keeps heartbeating and
        // polling, nothing fences it, and it hands the partition over once ClickHouse is back.
        const revoking = (s: Record<string, any>) =>
          Object.values(s.partitions as Record<string, { paused_by: string[] }>).some((p) => p.paused_by.includes("revoke"));
        await statsWhen(a, revoking, 30_000, "a settling a revocation");
        proxy.up();
        await statsWhen(b, (s) => s.assigned_partitions.length > 0, 60_000, "b given the partition a gave up");
      }
      if (!frozen && protocol.fenced) proxy.up();
      await produce(3);
      // The workers still run: the last insert's view writes the offsets table after the table, so a
      // read between the two sees a batch (up to BATCH_BACKLOG_ROWS) in the table alone. Both awaited.
      const settled = async () => {
        const c = await storedCounts(n);
        return c.ids === valid && c.offsets === valid ? true : undefined;
      };
      await waitFor(settled, 60_000, "every valid record stored, and its offset in the offsets table");
      const counts = await storedCounts(n);
      const dlq = await dlqCount(n.dlq);
      reportScenario({
        scenario: `revocation waits for ClickHouse${frozen ? ", frozen through the fence" : ""}${protocol.groupSessionMs ? `, ${protocol.groupSessionMs / 1000} s session` : ""}`,
        protocol: protocol.name,
        ...storedFigures(counts, dlq, await meter.stop(counts.offsets)),
      });
      expect([counts.rows, counts.offsetRows, counts.offsets]).toEqual([valid, valid, valid]);
      expect(dlq.envelopes).toBe(dlq.sources);
      expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0]);
      // Nothing froze A unless the test did: a revocation waiting on ClickHouse is no freeze, and holds
      // no send for the group's verdict once it ends.
      if (!frozen) expect(a.logs.filter((l) => l.includes("did not run for longer than half its session"))).toEqual([]);
    } finally {
      await meter?.stop(0);
      proxy.down();
      a.proc.kill("SIGCONT");
      a.proc.kill("SIGKILL");
      b?.proc.kill("SIGKILL");
    }
  }, 180_000);
