// The DLQ table filler's memory holds whatever the DLQ topic carries: anyone who may write to it
// chooses every field. 60 envelopes each carry an 8 MB string where the filler's bound once counted
// nothing (failed_field, worker_instance, the dlq.payload.as_text and dlq.source.topic headers),
// and come while ClickHouse is away, so the filler holds what it reads up to its bound. Every field
// is now capped and counted (src/dlq-table/row.ts FIELD_CAPS, rowBytes): its peak RSS (VmHWM) stays
// under the memory limit its manifest gives it, and every record is one row once ClickHouse is back.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { encodeEnvelope, HEADERS, provenanceHeaders } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { e2eScope } from "../support/e2e.ts";
import { props } from "../support/kafka.ts";
import { samplePeakRss } from "../support/rss.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { startWorker, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { names, ch } = e2eScope();
const MiB = 1024 * 1024;
const BIG = 8_000_000;

/** The filler's memory limit as deploy/kubernetes/dlq-fill/deployment.yaml sets it. */
function manifestLimit(): number {
  const m = /limits:\s*\n\s*memory:\s*(\d+)Mi/.exec(readFileSync(`${ROOT}/deploy/kubernetes/dlq-fill/deployment.yaml`, "utf8"));
  return Number(m![1]) * MiB;
}

test("60 envelopes with 8 MB strings in the fields no bound counted: each one row, its fields cut and said, peak RSS under the manifest's limit", async () => {
  const n = await names("fillmem");
  const big = (c: string) => c.repeat(BIG);
  const proxy = TcpProxy.inFrontOf(n.clickhouseUrl);
  const filler = await startWorker({ ...workerEnv(n), CLICKHOUSE_URL: proxy.url }, ["bun", `${ROOT}/src/main.ts`, "dlq", "fill"]);
  const rss = samplePeakRss(filler.proc.pid);
  // Its position read from the table first, then ClickHouse cut off.
  await waitFor(async () => ((await filler.stats()).next_offsets?.["0"] === 0 ? true : undefined), 30_000, "the filler's position");
  proxy.down();
  // One record a batch, lz4: 8 MB of one letter is a few KB on the wire, 8 MB again in the filler.
  const p = new Producer({ ...props, "compression.type": "lz4", "linger.ms": "0", "batch.num.messages": "1", "message.max.bytes": "100000000" });
  const kinds = ["failed_field", "worker_instance", "as_text", "source_topic"] as const;
  try {
    for (let i = 0; i < 60; i++) {
      const kind = kinds[i % 4]!;
      const value = encodeEnvelope(
        { reason: "malformed_json", field: kind === "failed_field" ? big("f") : null, payload: `{"i":${i}`, payloadIsObject: false },
        new Date(),
        kind === "worker_instance" ? big("w") : "w-1",
      );
      const headers: Array<[string, string]> = provenanceHeaders({ topic: kind === "source_topic" ? big("t") : n.raw, partition: 0, offset: i, stage: "decode", detail: "why" });
      if (kind === "as_text") headers.push([HEADERS.asText, big("a")]);
      await p.produce(n.dlq, value, { partition: 0, headers });
    }
    for (let i = 0; i < 10; i++)
      await p.produce(n.dlq, encodeEnvelope({ reason: "malformed_json", field: null, payload: `{"after":${i}`, payloadIsObject: false }, new Date(), "w-1"), { partition: 0 });
  } finally {
    p.close();
  }
  // ClickHouse away while the filler reads: it holds what its bound lets it, here every record.
  await waitFor(async () => ((await filler.stats()).read === 70 ? true : undefined), 60_000, "every record read while ClickHouse is away");
  proxy.up();
  const table = `${n.database}.${n.table}_dlq`;
  const counts = async () => {
    const q = `SELECT count() AS rows, uniqExact(dlq_partition, dlq_offset) AS offsets FROM ${table}`;
    const [c] = await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ rows: string; offsets: string }>();
    return [Number(c!.rows), Number(c!.offsets)];
  };
  try {
    await waitFor(async () => ((await counts())[0] === 70 ? true : undefined), 90_000, "70 rows in the DLQ table");
  } finally {
    const peak = rss.stop();
    console.log(`dlq fill: peak RSS ${(peak / MiB).toFixed(0)} MiB, the manifest's limit ${manifestLimit() / MiB} MiB`);
    expect(await filler.stop()).toBe(0);
    proxy.down();
    expect(peak).toBeLessThan(manifestLimit());
  }
  expect(await counts()).toEqual([70, 70]);
  const q = `SELECT dlq_offset, length(failed_field) AS ff, length(worker_instance) AS wi, length(payload_as_text) AS pt, length(source_topic) AS st, unreadable FROM ${table} WHERE dlq_offset < 60 ORDER BY dlq_offset`;
  const rows = await (await ch.query({ query: q, format: "JSONEachRow" })).json<{ ff: string | null; wi: string; pt: string; st: string; unreadable: string }>();
  rows.forEach((r, i) => {
    const kind = kinds[i % 4]!;
    const caps: Record<typeof kind, [string | null, number]> = {
      failed_field: [r.ff, 256], worker_instance: [r.wi, 256], as_text: [r.pt, 16], source_topic: [r.st, 249],
    };
    const [length, cap] = caps[kind];
    expect(Number(length)).toBe(cap);
    expect(r.unreadable).toContain(`cut at ${cap} of its ${BIG} characters`);
  });
}, 150_000);
