// The production profile (deploy/kubernetes/config/production.env, docs/production.md) as the shipped deployments run
// it: ClickHouse gone for 60 s under a steady stream, as a restart is (connections cut mid-insert,
// then refused), sends no record to the DLQ and stores every valid one exactly once.
import { expect, setDefaultTimeout, test } from "bun:test";
import { e2eScope } from "../support/e2e.ts";
import { committedCount } from "../support/kafka.ts";
import { productionProfile } from "../support/profile.ts";
import { CLICKHOUSE_URL, waitFor } from "../support/services.ts";
import { steadyStream } from "../support/synthetic.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, statsWhen, workerEnv, withFetchDebug } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, storedCounts } = e2eScope();

test("the production profile: ClickHouse restarting for 60 s under load, nothing dead-lettered, every valid row stored once", async () => {
  const n = await names("profile");
  const proxy = TcpProxy.inFrontOf(CLICKHOUSE_URL);
  const w = await startWorker(withFetchDebug(workerEnv(n, { ...productionProfile(), CLICKHOUSE_URL: proxy.url })));
  const stream = steadyStream(n.raw, { perRound: 1000, pauseMs: 200, seed: 900, rounds: 400 });
  try {
    await statsWhen(w, (s) => s.total_clickhouse >= 2000, 30_000, "rows flowing");
    proxy.down(); // inserts under way are cut, new connections refused
    await waitFor(() => (w.logs.some((l) => l.includes("consumption paused until one does")) ? true : undefined), 60_000, "paused");
    await Bun.sleep(60_000);
    const during = await w.stats();
    expect([during.total_dlq, during.clickhouse_exhausted_batches]).toEqual([0, 0]);
    proxy.up();
    await Bun.sleep(2_000);
    await stream.stop();
    const valid = stream.sent();
    await statsWhen(w, (s) => s.total_processed === valid, 60_000, "everything durable after the restart");
    // Counted as billing counts: rows beside distinct ids.
    const c = await storedCounts(n);
    expect([c.rows, c.ids]).toEqual([valid, valid]);
    expect(await committedCount(n.dlq)).toBe(0);
    expect(w.logs.some((l) => l.includes("consumption resumed"))).toBe(true);
    expect(await w.stop()).toBe(0);
  } finally {
    proxy.down();
    w.proc.kill("SIGKILL");
    await stream.stop();
  }
}, 200_000);
