/**
 * The DLQ table's filler killed with SIGKILL at random moments: a DLQ of N envelopes (signed, with
 * the worker's headers; a few records that are not envelopes among them), `dlq fill` killed `kills`
 * times, each a random 0–1.5 s after it first stores, and started again, with every `loss`-th
 * insert's answer lost after ClickHouse stored it (a proxy in front of CLICKHOUSE_URL), then run to
 * the end. Checked as billing counts: count() without FINAL against the distinct (dlq_partition,
 * dlq_offset), against the DLQ's records. CLICKHOUSE_URL picks the server (the 26.9 endpoint: http://127.0.0.1:8127).
 * Usage: bun scripts/chaos/dlq-fill-kill-loop.ts [--envelopes 50000] [--kills 30] [--loss 3]   (services running)
 */
import { FLAG, numberFlag, parseFlags } from "../../src/cli/args.ts";
import { encodeEnvelope, provenanceHeaders } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { TcpProxy } from "../../test/support/tcp-proxy.ts";
import { prepareRun } from "../lib/harness.ts";

const args = parseFlags(process.argv.slice(2), { envelopes: FLAG.value, kills: FLAG.value, loss: FLAG.value }, "dlq-fill-kill-loop");
const N = numberFlag(args, "envelopes", 50_000, 100, 1e8);
const KILLS = numberFlag(args, "kills", 30, 0, 1000);
const LOSS = numberFlag(args, "loss", 3, 0, 1000);
const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;
const run = await prepareRun("dlqkill", "chaos");
const producer = new Producer({ "bootstrap.servers": run.brokers, "linger.ms": "20" });
for (let i = 0; i < N; i += 5_000)
  await Promise.all(
    Array.from({ length: Math.min(5_000, N - i) }, (_, k) => {
      const j = i + k;
      if (j % 997 === 0) return producer.produce(run.dlq, `not an envelope ${j}`);
      const payload = `{"raw_id":"kill-${j}","device_id":"dev-${j % 31}","caller_num":"+447700900${j % 1000}", oops`;
      const value = encodeEnvelope({ reason: "malformed_json", field: null, payload, payloadIsObject: false }, new Date(), "w");
      return producer.produce(run.dlq, value, { headers: provenanceHeaders({ topic: "cdr.raw", partition: 0, offset: j, stage: "decode", detail: "x" }) });
    }),
  );
producer.close();

const proxy = TcpProxy.inFrontOf(process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123");
if (LOSS > 0) proxy.loseAnswers((i) => (i % LOSS === 1 ? "reset" : null));
const env = run.env({ LOG_LEVEL: "info", CLICKHOUSE_URL: proxy.url, BATCH_SIZE: "100", BATCH_BACKLOG_ROWS: "100", BATCH_FLUSH_INTERVAL_SECONDS: "0.1", KAFKA_PROP_SESSION_TIMEOUT_MS: "6000", STATS_PORT: "0" });
const counts = async () => {
  const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${run.database}.${run.table}_dlq`;
  const [r] = await (await run.ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
  return { rows: Number(r!.rows), offsets: Number(r!.offsets) };
};
const t0 = performance.now();
let kills = 0;
for (; kills < KILLS && (await counts()).offsets < N; kills++) {
  const f = Bun.spawn(["bun", MAIN, "dlq", "fill"], { env, stdout: "ignore", stderr: "ignore" });
  // Once it stores (the last one's session over, the partition its), at a random moment after.
  const before = (await counts()).rows;
  for (const until = performance.now() + 15_000; performance.now() < until && (await counts()).rows === before; ) await Bun.sleep(20);
  await Bun.sleep(Math.random() * 1500);
  f.kill("SIGKILL");
  await f.exited;
}
proxy.loseAnswers(() => null);
const last = Bun.spawn(["bun", MAIN, "dlq", "fill"], { env, stdout: "ignore", stderr: "pipe" });
// Its stop is a clean one only once it runs (its signal handlers in place): wait for its line.
const reader = last.stderr.getReader();
for (let seen = ""; !seen.includes("dlq fill running"); ) {
  const { done, value } = await reader.read();
  if (done) break;
  seen = (seen + new TextDecoder().decode(value)).slice(-4096);
}
void (async () => {
  while (!(await reader.read()).done);
})();
while ((await counts()).offsets < N) await Bun.sleep(200);
last.kill("SIGTERM");
const code = await last.exited;
const c = await counts();
const verdict = c.rows === N && c.offsets === N && code === 0 ? "exact" : "FAILED";
console.log(JSON.stringify({ verdict, envelopes: N, kills, lost_answers: proxy.lost.reset, ...c, last_exit: code, seconds: Math.round((performance.now() - t0) / 1000) }));
proxy.down();
await run.cleanup();
process.exit(verdict === "exact" ? 0 : 1);
