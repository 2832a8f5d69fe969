-- The normalized table for a ClickHouse cluster (`cdr-worker migrate --cluster NAME`), ON CLUSTER:
-- {table}_local on every node, ReplicatedReplacingMergeTree replicated through ZooKeeper under
-- the server's {shard}/{replica} macros, and {table} a Distributed table of the same columns that
-- the worker writes to, sharded by a hash of cdr_id so that every replay of a record lands on the
-- shard that already holds it and collapses there. Columns, key and partitioning as 001_cdr.sql.
CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster};

CREATE TABLE IF NOT EXISTS {database}.{table}_local ON CLUSTER {cluster}
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
    ingested_at        DateTime('UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}_local', '{replica}', ingested_at)
PARTITION BY toYYYYMM(session_start_time)
ORDER BY (session_start_time, msisdn, cell_id, cdr_id);

CREATE TABLE IF NOT EXISTS {database}.{table} ON CLUSTER {cluster} AS {database}.{table}_local
ENGINE = Distributed({cluster}, {database}, {table}_local, cityHash64(toString(cdr_id)));
