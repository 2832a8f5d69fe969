-- Normalized CDRs. Applies on ClickHouse 18.16 (Debian) and current releases alike, so it avoids
-- IPv4, DateTime64 and LowCardinality: source_ip is a UInt32 (query it with IPv4NumToString),
-- radio_access_type an Enum8 keyed by the vendor's rat code.
-- ReplacingMergeTree collapses replays of a record (at-least-once delivery) during merges; the
-- sorting key ends in cdr_id and every other key column is derived from the same raw record, so
-- replays share the whole key. Count with `FINAL` or `uniqExact(cdr_id)` to see deduplicated rows.
-- kafka_partition and kafka_offset say which raw record a row came from; -1 marks rows written
-- before the columns existed.
-- {table}_offsets holds every stored row's (kafka_partition, kafka_offset, cdr_id), kept by a materialized
-- view on each insert and sorted by them: the worker's replay check ("which offsets of partition P
-- at or past O are stored") reads a key range of it instead of scanning the table, and `cdr-worker
-- audit` finds a row stored twice, or a producer's replay, there after merges have collapsed it
-- here. A plain MergeTree: it never collapses. The view runs after the table's write in the same insert, so it can lack a row
-- the table has (the view's write failed), never hold one the table lacks.
CREATE DATABASE IF NOT EXISTS {database};

CREATE TABLE IF NOT EXISTS {database}.{table}
(
    cdr_id             UUID,
    raw_id             String,
    device_id          String,
    msisdn             String,
    service_type       String,
    radio_access_type  Enum8('3G' = 1, 'LTE_4G' = 6, '5G_NR' = 9),
    cell_id            String,
    session_start_time DateTime('UTC'),
    session_end_time   DateTime('UTC'),
    duration_seconds   UInt32,
    up_bytes           UInt64,
    down_bytes         UInt64,
    total_bytes        UInt64,
    source_ip          UInt32,
    ingested_at        DateTime('UTC'),
    kafka_partition    Int32 DEFAULT -1,
    kafka_offset       Int64 DEFAULT -1
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(session_start_time)
ORDER BY (session_start_time, msisdn, cell_id, cdr_id);

CREATE TABLE IF NOT EXISTS {database}.{table}_offsets
(
    kafka_partition    Int32,
    kafka_offset       Int64,
    cdr_id             UUID,
    ingested_at        DateTime('UTC')
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(ingested_at)
ORDER BY (kafka_partition, kafka_offset);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{table}_offsets_mv TO {database}.{table}_offsets
AS SELECT kafka_partition, kafka_offset, cdr_id, ingested_at FROM {database}.{table} WHERE kafka_offset >= 0;
