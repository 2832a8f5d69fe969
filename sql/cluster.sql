-- The normalized table for a ClickHouse cluster (`cdr-worker migrate --cluster NAME`), ON CLUSTER:
-- {table}_local on every node, ReplicatedReplacingMergeTree replicated through ZooKeeper under
-- the server's {shard}/{replica} macros, and {table} a Distributed table of the same columns that
-- the worker writes to, sharded by a hash of cdr_id so that every replay of a record lands on the
-- shard that already holds it and collapses there. {columns} is 001_cdr.sql's column list (one
-- source for both topologies); the key and partitioning are the same as there. The offsets table
-- likewise: {table}_offsets_local on every node, kept by a view on {table}_local (on the replica an
-- insert reaches; the other gets the part by replication), read through {table}_offsets.
CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster};

CREATE TABLE IF NOT EXISTS {database}.{table}_local ON CLUSTER {cluster}
{columns}
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}_local', '{replica}', ingested_at)
PARTITION BY toYYYYMM(session_start_time)
ORDER BY (session_start_time, msisdn, cell_id, cdr_id);

CREATE TABLE IF NOT EXISTS {database}.{table} ON CLUSTER {cluster} AS {database}.{table}_local
ENGINE = Distributed({cluster}, {database}, {table}_local, cityHash64(toString(cdr_id)));

CREATE TABLE IF NOT EXISTS {database}.{table}_offsets_local ON CLUSTER {cluster}
(
    kafka_partition    Int32,
    kafka_offset       Int64,
    cdr_id             UUID,
    ingested_at        DateTime('UTC')
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}_offsets_local', '{replica}')
PARTITION BY toYYYYMM(ingested_at)
ORDER BY (kafka_partition, kafka_offset);

CREATE TABLE IF NOT EXISTS {database}.{table}_offsets ON CLUSTER {cluster} AS {database}.{table}_offsets_local
ENGINE = Distributed({cluster}, {database}, {table}_offsets_local, rand());

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{table}_offsets_mv ON CLUSTER {cluster}
TO {database}.{table}_offsets_local
AS SELECT kafka_partition, kafka_offset, cdr_id, ingested_at FROM {database}.{table}_local WHERE kafka_offset >= 0;
