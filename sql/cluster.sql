-- The normalized table for a ClickHouse cluster (`cdr-worker migrate --cluster NAME`), ON CLUSTER:
-- {table}_local on every node, ReplicatedReplacingMergeTree replicated through ZooKeeper under
-- the server's {shard}/{replica} macros, and {table} a Distributed table of the same columns that
-- the worker writes to, sharded by a hash of cdr_id so that every replay of a record lands on the
-- shard that already holds it and collapses there. {columns} is 001_cdr.sql's column list (one
-- source for both topologies); the key and partitioning are the same as there.
CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster};

CREATE TABLE IF NOT EXISTS {database}.{table}_local ON CLUSTER {cluster}
{columns}
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}_local', '{replica}', ingested_at)
PARTITION BY toYYYYMM(session_start_time)
ORDER BY (session_start_time, msisdn, cell_id, cdr_id);

CREATE TABLE IF NOT EXISTS {database}.{table} ON CLUSTER {cluster} AS {database}.{table}_local
ENGINE = Distributed({cluster}, {database}, {table}_local, cityHash64(toString(cdr_id)));
