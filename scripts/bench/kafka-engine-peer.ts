/**
 * The peer a ClickHouse user would pick instead of the worker: ClickHouse's own Kafka table engine
 * (JSONEachRow, `kafka_max_block_size` = the worker's batch size) feeding a table of the worker's
 * columns through a materialized view. It validates nothing: no phone numbers, no UUIDv5 (18.16
 * has none; generateUUIDv4 stands in), no DLQ, and it cannot skip a broken message, so it reads
 * a valid-only copy of the backlog on a topic with the same partitions. Its table has every column
 * of the worker's; 18.16's Kafka engine has no virtual columns (`_partition`, `_offset`), so its view
 * fills the provenance columns with -1, the DDL's mark for rows the worker did not write. The view is
 * tried on one record first (a Null table behind the same SELECT): a view the server refuses fails
 * the bench at once with the server's error, rather than the peer storing nothing until its deadline.
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

/** How long the peer may store nothing before the bench gives up on it (18.16 flushes every 7.5 s). */
const STALL_MS = 60_000;
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
  const columns = `raw_id String, device_id String, caller_num String, svc String, rat UInt8, epoch_start UInt32,
      epoch_end UInt32, up_bytes UInt64, down_bytes UInt64, lac UInt32, ci UInt32, source_ip String`;
  const select = (from: string) => `SELECT generateUUIDv4() AS cdr_id, raw_id, device_id, caller_num AS msisdn,
      svc AS service_type, CAST(rat AS ${RAT_ENUM}) AS radio_access_type, concat(toString(lac), '_', toString(ci)) AS cell_id,
      toDateTime(epoch_start, 'UTC') AS session_start_time, toDateTime(epoch_end, 'UTC') AS session_end_time,
      toUInt32(epoch_end - epoch_start) AS duration_seconds,
      up_bytes, down_bytes, up_bytes + down_bytes AS total_bytes, IPv4StringToNum(source_ip) AS source_ip,
      toDateTime(now(), 'UTC') AS ingested_at, toInt32(-1) AS kafka_partition, toInt64(-1) AS kafka_offset FROM ${from}`;
  await ch.command({ query: `CREATE TABLE ${target} AS ${db}.${name}` });
  await probeView(ch, `${target}_probe`, target, columns, select, opts.texts[0]!);
  await ch.command({
    query: `CREATE TABLE ${queue} (${columns})
      ENGINE = Kafka SETTINGS kafka_broker_list = '${brokers}', kafka_topic_list = '${topic}', kafka_group_name = '${name}-peer',
      kafka_format = 'JSONEachRow', kafka_max_block_size = ${opts.blockSize}, kafka_num_consumers = 1`,
  });
  const cpu0 = opts.cpuSeconds();
  const t0 = performance.now();
  // Attaching the view starts the consumption.
  await ch.command({ query: `CREATE MATERIALIZED VIEW ${view} TO ${target} AS ${select(queue)}` });
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
    // A peer that stopped storing (its server logs why) ends the bench rather than its deadline.
    if (performance.now() - steps.at(-1)!.at > STALL_MS)
      throw new Error(`the Kafka-engine peer stored nothing for ${STALL_MS / 1000} s at ${rows} of ${opts.texts.length} rows`);
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

/**
 * The peer's view behind a Null table, fed one record: ClickHouse pushes an insert to its views
 * before it answers, so a view it refuses (a column it cannot fill) fails here with its own error.
 */
async function probeView(
  ch: ClickHouseClient,
  name: string,
  like: string,
  columns: string,
  select: (from: string) => string,
  text: string,
): Promise<void> {
  const [source, sink, view] = [`${name}_source`, `${name}_sink`, `${name}_mv`];
  try {
    await ch.command({ query: `CREATE TABLE ${source} (${columns}) ENGINE = Null` });
    await ch.command({ query: `CREATE TABLE ${sink} AS ${like}` });
    await ch.command({ query: `CREATE MATERIALIZED VIEW ${view} TO ${sink} AS ${select(source)}` });
    await ch.exec({ query: `INSERT INTO ${source} FORMAT JSONEachRow ${text}` }).then((r) => r.stream.resume());
    const rs = await ch.query({ query: `SELECT count() AS c FROM ${sink}`, format: "JSONEachRow" });
    const stored = Number((await rs.json<{ c: string }>())[0]!.c);
    if (stored !== 1) throw new Error(`the Kafka-engine peer's view stored ${stored} rows of one record`);
  } catch (e) {
    throw new Error(`the Kafka-engine peer's view is refused by ClickHouse: ${(e as Error).message}`, { cause: e });
  } finally {
    for (const t of [view, sink, source]) await ch.command({ query: `DROP TABLE IF EXISTS ${t}` }).catch(() => {});
  }
}
