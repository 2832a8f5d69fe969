/**
 * The peer a ClickHouse user would pick instead of the worker: ClickHouse's own Kafka table engine
 * (JSONEachRow, `kafka_max_block_size` = the worker's batch size) feeding a table of the worker's
 * columns through a materialized view. It validates nothing: no phone numbers, no UUIDv5 (18.16
 * has none; generateUUIDv4 stands in), no DLQ, and it cannot skip a broken message, so it reads
 * a valid-only copy of the backlog on a topic with the same partitions.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { Admin } from "../../src/kafka/admin.ts";
import { Producer } from "../../src/kafka/producer.ts";

export interface PeerResult {
  rows: number;
  /** From the view's creation (which starts consumption) to the last row stored. */
  seconds: number;
  rowsPerSecond: number;
  /**
   * How long the last rows waited: 18.16 writes a block when it holds kafka_max_block_size rows
   * or when stream_flush_interval_ms (7.5 s) has passed, so the partial last block waits that
   * long. The gap before the last step of the row count, when it is the longest of the run.
   */
  finalWaitSeconds: number;
  rowsPerSecondWithoutFinalWait: number;
  /** ClickHouse's CPU (all its threads) over the run, µs per row. */
  clickhouseCpuUsPerRow: number;
}

const RAT_ENUM = "Enum8('3G' = 1, 'LTE_4G' = 6, '5G_NR' = 9)";

export async function runKafkaEnginePeer(opts: {
  brokers: string;
  ch: ClickHouseClient;
  database: string;
  name: string;
  /** Valid records only. */
  texts: string[];
  partitions: number;
  blockSize: number;
  cpuSeconds: () => number;
}): Promise<PeerResult> {
  const { ch, database: db, name, brokers } = opts;
  const topic = `${name}.peer`;
  const admin = new Admin({ "bootstrap.servers": brokers });
  await admin.createTopics([{ name: topic, partitions: opts.partitions, replicationFactor: 1, configs: { "compression.type": "lz4" } }]);
  const producer = new Producer({ "bootstrap.servers": brokers, "linger.ms": "20", "batch.num.messages": "10000", "compression.type": "lz4" });
  for (let i = 0; i < opts.texts.length; i += 10_000) await producer.produceBatch(topic, opts.texts.slice(i, i + 10_000));
  producer.close();

  const queue = `${db}.${name}_peer_queue`, target = `${db}.${name}_peer`, view = `${db}.${name}_peer_mv`;
  await ch.command({ query: `CREATE TABLE ${target} AS ${db}.${name}` });
  await ch.command({
    query: `CREATE TABLE ${queue} (raw_id String, device_id String, caller_num String, svc String, rat UInt8, epoch_start UInt32,
      epoch_end UInt32, up_bytes UInt64, down_bytes UInt64, lac UInt32, ci UInt32, source_ip String)
      ENGINE = Kafka SETTINGS kafka_broker_list = '${brokers}', kafka_topic_list = '${topic}', kafka_group_name = '${name}-peer',
      kafka_format = 'JSONEachRow', kafka_max_block_size = ${opts.blockSize}, kafka_num_consumers = 1`,
  });
  const cpu0 = opts.cpuSeconds();
  const t0 = performance.now();
  // Attaching the view starts the consumption.
  await ch.command({
    query: `CREATE MATERIALIZED VIEW ${view} TO ${target} AS SELECT generateUUIDv4() AS cdr_id, raw_id, device_id, caller_num AS msisdn,
      svc AS service_type, CAST(rat AS ${RAT_ENUM}) AS radio_access_type, concat(toString(lac), '_', toString(ci)) AS cell_id,
      toDateTime(epoch_start, 'UTC') AS session_start_time, toDateTime(epoch_end, 'UTC') AS session_end_time,
      toUInt32(epoch_end - epoch_start) AS duration_seconds,
      up_bytes, down_bytes, up_bytes + down_bytes AS total_bytes, IPv4StringToNum(source_ip) AS source_ip, toDateTime(now(), 'UTC') AS ingested_at FROM ${queue}`,
  });
  let rows = 0;
  const deadline = Date.now() + 600_000;
  // Each change of the count and when it was seen; the last row's is the end of the run.
  const steps: Array<{ at: number; rows: number }> = [{ at: t0, rows: 0 }];
  // count() of a MergeTree is answered from part metadata: polling it costs ClickHouse next to nothing.
  while (rows < opts.texts.length && Date.now() < deadline) {
    await Bun.sleep(100);
    const rs = await ch.query({ query: `SELECT count() AS c FROM ${target}`, format: "JSONEachRow" });
    rows = Number((await rs.json<{ c: string }>())[0]!.c);
    if (rows !== steps.at(-1)!.rows) steps.push({ at: performance.now(), rows });
  }
  const seconds = (steps.at(-1)!.at - t0) / 1000;
  const gaps = steps.slice(1).map((s, i) => (s.at - steps[i]!.at) / 1000);
  const lastGap = gaps.at(-1) ?? 0;
  const finalWaitSeconds = steps.length > 2 && lastGap >= Math.max(...gaps.slice(0, -1)) ? lastGap : 0;
  const cpu = opts.cpuSeconds() - cpu0;
  for (const t of [view, queue, target]) await ch.command({ query: `DROP TABLE IF EXISTS ${t}` }).catch(() => {});
  await admin.deleteTopics([topic]).catch(() => {});
  admin.close();
  return {
    rows,
    seconds,
    rowsPerSecond: rows / seconds,
    finalWaitSeconds,
    rowsPerSecondWithoutFinalWait: rows / (seconds - finalWaitSeconds),
    clickhouseCpuUsPerRow: (cpu * 1e6) / Math.max(1, rows),
  };
}
