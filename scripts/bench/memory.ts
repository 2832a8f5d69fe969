/**
 * What a buffered row costs in resident memory, measured rather than estimated: the worker, as
 * deployed (a subprocess), in front of a ClickHouse whose inserts never answer (a proxy passes every
 * other request and holds each insert's connection), so that FLUSH_CONCURRENCY inserts stay in
 * flight and the filling batch grows to BATCH_BACKLOG_ROWS before consumption pauses. RSS is sampled
 * idle (started on an empty topic), then once `buffered_rows` has stood still for 3 s; the growth
 * over the rows held is the cost of a row, insert body and payload and the copy in flight included.
 * Each setting is a batch size, a backlog and a record size (synthetic records, padded with a field
 * the worker ignores).
 * Usage: bun scripts/bench/memory.ts [binary=bun src/main.ts]   (services running)
 */
import type { Socket } from "bun";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { prepareRun } from "../lib/harness.ts";

const binary = process.argv[2];
const CONCURRENCY = 2;
const SETTINGS = [
  { batch: 1000, backlog: 1000, pad: 0 },
  { batch: 1000, backlog: 4096, pad: 0 },
  { batch: 1000, backlog: 10000, pad: 0 },
  { batch: 10000, backlog: 10000, pad: 0 },
  { batch: 1000, backlog: 4096, pad: 1500 },
  { batch: 10000, backlog: 10000, pad: 1500 },
];

/** A proxy to ClickHouse that passes everything but inserts: an insert's connection is held, unanswered. */
function insertHoldingProxy(target: URL): { url: string; stop: () => void } {
  interface Conn { server?: Socket<any>; pending: Uint8Array[]; held: boolean }
  const listener = Bun.listen<Conn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        client.data = { pending: [], held: false };
        Bun.connect({
          hostname: target.hostname,
          port: Number(target.port),
          socket: {
            open(server) {
              client.data.server = server;
              for (const c of client.data.pending.splice(0)) server.write(c);
            },
            data(_server, chunk) {
              client.write(chunk);
            },
            close() {
              if (!client.data.held) client.end();
            },
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        if (!client.data.held && new TextDecoder().decode(chunk.subarray(0, 2048)).includes("query=INSERT")) client.data.held = true;
        if (client.data.held) return;
        if (client.data.server) client.data.server.write(chunk);
        else client.data.pending.push(new Uint8Array(chunk));
      },
      close(client) {
        client.data.server?.end();
      },
    },
  });
  return { url: `http://127.0.0.1:${listener.port}`, stop: () => listener.stop(true) };
}

const MiB = 1024 * 1024;
const results: Array<Record<string, unknown>> = [];
for (const s of SETTINGS) {
  const run = await prepareRun("mem", "bench");
  const proxy = insertHoldingProxy(new URL(process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123"));
  try {
    const worker = await run.startWorker({
      binary,
      extra: {
        CLICKHOUSE_URL: proxy.url,
        CLICKHOUSE_REQUEST_TIMEOUT_MS: "600000",
        BATCH_SIZE: String(s.batch),
        BATCH_BACKLOG_ROWS: String(s.backlog),
        FLUSH_CONCURRENCY: String(CONCURRENCY),
        BATCH_FLUSH_INTERVAL_SECONDS: "0.2",
      },
    });
    const sample = async (ms: number) => {
      let peak = 0;
      for (let t = 0; t < ms; t += 100) {
        peak = Math.max(peak, run.rssMiB(worker.pid));
        await Bun.sleep(100);
      }
      return peak;
    };
    const idle = await sample(3_000);
    // Enough records to fill every slot, and a fifth more waiting in Kafka.
    const n = Math.ceil((CONCURRENCY + 1) * s.backlog * 1.2);
    const g = new SyntheticCdrs({ seed: 3, invalidShare: 0, idPrefix: `mem${run.table}` });
    const pad = s.pad > 0 ? `,"note":"${"x".repeat(s.pad)}"}` : "}";
    const texts = Array.from({ length: n }, () => g.next().text.slice(0, -1) + pad);
    const p = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20", "compression.type": "lz4" });
    for (let i = 0; i < n; i += 10_000) await p.produceBatch(run.raw, texts.slice(i, i + 10_000));
    p.close();
    // Until the rows held stand still for 3 s.
    let rows = -1;
    let still = 0;
    for (let k = 0; k < 600 && still < 30; k++) {
      await Bun.sleep(100);
      const now = (await run.stats()).buffered_rows as number;
      still = now === rows && now > 0 ? still + 1 : 0;
      rows = now;
    }
    const held = await sample(3_000);
    worker.kill("SIGKILL");
    await worker.exited;
    const line = {
      batch_size: s.batch,
      backlog_rows: s.backlog,
      record_bytes: Buffer.byteLength(texts[0]!),
      rows_held: rows,
      rss_idle_mib: idle,
      rss_held_mib: held,
      bytes_per_row: Math.round(((held - idle) * MiB) / Math.max(1, rows)),
    };
    results.push(line);
    console.log(JSON.stringify(line));
  } finally {
    proxy.stop();
    await run.cleanup();
  }
}
console.log(JSON.stringify({ max_bytes_per_row: Math.max(...results.map((r) => r.bytes_per_row as number)) }));
process.exit(0);
