// The replay check asks the broker without blocking the event loop. A first owner leaves commits
// with metadata and a few envelopes in the DLQ; the second owner's check is caught where it asks
// ClickHouse which inserts still run, the broker is stopped (SIGSTOP: it takes connections and
// answers nothing), and the check goes on to its broker questions (the DLQ's partitions, where to
// start and end reading it). Meanwhile /healthz must answer as fast as ever: p99 under 50 ms. Once
// the broker answers again the check finishes and every record is delivered once.
import { expect, setDefaultTimeout, test } from "bun:test";
import { e2eScope } from "../support/e2e.ts";
import { committedCount, committedOffsets } from "../support/kafka.ts";
import { CLICKHOUSE_URL, ROOT, waitFor } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

const STOPPED_MS = 3_000;

test("/healthz answers within 50 ms (p99) while the replay check waits for a broker that does not answer; the check then finishes", async () => {
  const n = await names("slowcheck");
  // a commits without transactions (at-least-once), as a release without them did: b's check of
  // such a commit reads the DLQ after ClickHouse, so the broker is what it waits for.
  const a = await startWorker(workerEnv(n, { BATCH_FLUSH_INTERVAL_SECONDS: "0.2", DELIVERY: "at-least-once" }));
  await statsWhen(a, (s) => s.assigned_partitions.length === 3, 30_000, "a owns every partition");
  const first = await produceSynthetic(n.raw, 300, 0.1, 11);
  await statsWhen(a, (s) => s.total_processed === 300 && s.commits > 0 && s.buffered_rows === 0, 30_000, "a delivered");
  expect(await a.stop()).toBe(0);

  const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
  // insertsEnded's question: the check has read the group's offsets and asks the broker next.
  const held = proxy.hold("query_id FROM system.processes WHERE (query_id LIKE");
  const b = await startWorker(workerEnv(n, { CLICKHOUSE_URL: proxy.url }));
  const broker = Number(await Bun.file(`${ROOT}/.local/kafka/kafka.pid`).text());
  try {
    await held.seen;
    process.kill(broker, "SIGSTOP");
    held.release();
    const latencies: number[] = [];
    const until = Date.now() + STOPPED_MS;
    while (Date.now() < until) {
      const t = performance.now();
      await fetch(`${b.statsUrl}/healthz`).then((r) => r.arrayBuffer());
      latencies.push(performance.now() - t);
      await Bun.sleep(10);
    }
    // The check was still waiting for the broker all along.
    const during = await b.stats();
    process.kill(broker, "SIGCONT");
    latencies.sort((x, y) => x - y);
    const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
    console.log(`healthz while the broker was stopped: ${latencies.length} answers, p99 ${p99.toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms`);
    expect(during.replay_checks_pending).toBe(3);
    expect(latencies.length).toBeGreaterThan(STOPPED_MS / 50);
    expect(p99).toBeLessThan(50);

    await statsWhen(b, (s) => s.replay_checks > 0 && s.replay_checks_pending === 0, 40_000, "b's check done");
    const second = await produceSynthetic(n.raw, 300, 0.1, 12);
    const total = 600;
    // b processes only the new records: the check found every earlier one delivered (committed).
    await statsWhen(b, (s) => s.total_processed === 300 && s.buffered_rows === 0, 40_000, "b delivered");
    const committed = () => [...committedOffsets(n.group, n.raw, 3).values()].reduce((s, o) => s + (o > 0n ? o : 0n), 0n);
    await waitFor(() => (committed() === BigInt(total) ? true : undefined), 30_000, "every offset committed");
    expect(await b.stop()).toBe(0);
    const rs = await ch.query({
      query: `SELECT count() AS rows, uniqExact(kafka_partition, kafka_offset) AS offsets FROM ${n.database}.${n.table}_offsets`,
      format: "JSONEachRow",
    });
    const valid = first.valid + second.valid;
    const [stored] = await rs.json<{ rows: string; offsets: string }>();
    expect([Number(stored!.rows), Number(stored!.offsets)]).toEqual([valid, valid]);
    expect((await committedCount(n.dlq))).toBe(total - valid);
  } finally {
    process.kill(broker, "SIGCONT");
    held.release();
    proxy.down();
  }
}, 120_000);
