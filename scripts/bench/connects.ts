/**
 * TCP connects per ClickHouse insert, with keep-alive (the default idle TTL) and without: the
 * worker drains the same backlog through a loopback proxy that counts the connections it accepts.
 * Usage: bun scripts/bench/connects.ts [records=200000]   (services running)
 */
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun } from "../lib/harness.ts";

const N = Number(process.argv[2] ?? 200_000);
const chUrl = new URL(process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123");

/** A pass-through TCP proxy in front of ClickHouse that counts accepted connections. */
function countingProxy() {
  let accepted = 0;
  type Side = { peer?: import("bun").Socket<Side>; pending: Uint8Array[] };
  const listener = Bun.listen<Side>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        accepted++;
        client.data = { pending: [] };
        void Bun.connect<Side>({
          hostname: chUrl.hostname,
          port: Number(chUrl.port),
          socket: {
            open(server) {
              server.data = { peer: client, pending: [] };
              client.data.peer = server;
              for (const c of client.data.pending) server.write(c);
            },
            data(server, chunk) { server.data.peer?.write(chunk); },
            close(server) { server.data.peer?.end(); },
            error(server) { server.data.peer?.end(); },
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        if (client.data.peer) client.data.peer.write(chunk);
        else client.data.pending.push(new Uint8Array(chunk));
      },
      close(client) { client.data.peer?.end(); },
    },
  });
  return { url: `http://127.0.0.1:${listener.port}`, accepted: () => accepted, stop: () => listener.stop(true) };
}

const results: Record<string, unknown> = {};
for (const [label, idleMs] of [["keep_alive_2000ms", "2000"], ["no_keep_alive", "0"]] as const) {
  const run = await prepareRun("connects", "bench");
  const gen = new SyntheticCdrs({ seed: 1, invalidShare: 0.03, idPrefix: `c${run.table}` });
  const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20", "batch.num.messages": "10000" });
  for (let i = 0; i < N; i += 10_000) await producer.produceBatch(run.raw, Array.from({ length: Math.min(10_000, N - i) }, () => gen.next().text));
  producer.close();
  const proxy = countingProxy();
  const worker = await run.startWorker({ extra: { CLICKHOUSE_URL: proxy.url, CLICKHOUSE_KEEP_ALIVE_IDLE_MS: idleMs, BATCH_FLUSH_INTERVAL_SECONDS: "0.1" } });
  const t0 = Date.now();
  let s: Record<string, any>;
  do {
    await Bun.sleep(1000);
    s = await run.stats();
  } while (s.total_processed < N);
  const seconds = (Date.parse(s.last_commit_at) - t0) / 1000;
  worker.kill("SIGTERM");
  await worker.exited;
  // The worker's start-up (schema check, ping) opens connections too; the drain's inserts dominate.
  results[label] = { inserts: s.flush_count, connects: proxy.accepted(), connects_per_insert: +(proxy.accepted() / s.flush_count).toFixed(3), retries: s.clickhouse_retries, records_per_s: Math.round(N / seconds) };
  proxy.stop();
  await run.cleanup();
}
console.log(JSON.stringify({ records: N, ...results }));
process.exit(0);
