-- The DLQ table on a cluster (`migrate --cluster NAME`), ON CLUSTER: {table}_dlq_local replicated on
-- every node, and {table}_dlq a Distributed table sharded by the DLQ partition, so each of the
-- filler's inserts (one DLQ partition's rows) lands on one shard, whole. {columns} is 002_dlq.sql's
-- column list.
CREATE TABLE IF NOT EXISTS {database}.{table}_dlq_local ON CLUSTER {cluster}
{columns}
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}_dlq_local', '{replica}')
PARTITION BY toYYYYMMDD(stored_at)
ORDER BY (failure_reason, failed_at, dlq_partition, dlq_offset);

CREATE TABLE IF NOT EXISTS {database}.{table}_dlq ON CLUSTER {cluster} AS {database}.{table}_dlq_local
ENGINE = Distributed({cluster}, {database}, {table}_dlq_local, dlq_partition);

CREATE VIEW IF NOT EXISTS {database}.{table}_dlq_summary ON CLUSTER {cluster}
AS SELECT failed_at, failure_reason, failed_field, stage, error_detail, attempts, source_topic, source_partition,
    source_offset, dlq_partition, dlq_offset, worker_instance, payload_sha256, mac_verified, raw_id, cdr_id,
    device_id, caller_prefix, payload_truncated, payload_as_text, unreadable, stored_at
FROM {database}.{table}_dlq;
