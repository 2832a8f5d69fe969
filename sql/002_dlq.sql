-- The DLQ as a table: one row per record of the DLQ topic that a read_committed reader sees
-- (`cdr-worker dlq fill` writes it, docs/dlq.md). The topic stays the source of truth; the table
-- is what an operator asks with SQL. Applies on 18.16 and current releases alike.
-- A plain MergeTree: the filler stores each record exactly once (its position is the table's
-- max(dlq_offset) per DLQ partition, and every insert is one DLQ partition's rows in one daily
-- partition, so it lands whole or not at all), and nothing ever collapses rows, so count() is the
-- count of envelopes. Partitioned by the day the filler stored the row: an insert is one part, and
-- retention drops whole days (`migrate --prune-dlq`; 18.16 has no TTL).
-- Sorted for the questions docs/dlq.md asks: by reason, then time.
-- failure_reason is '' and `unreadable` says why for a DLQ record that is not an envelope (anyone
-- who may write to the topic can put anything there): counted, never dropped.
-- raw_id, cdr_id, device_id and caller_prefix are read leniently from the payload, null where it has
-- none readable; cdr_id is the worker's UUIDv5 of raw_id (18.16 cannot compute one).
-- mac_verified: 1 where the MAC proves the whole envelope (form 3), 0 where it does not (an older
-- form proves the source only), null where the envelope carries no MAC or the filler has no key.
CREATE TABLE IF NOT EXISTS {database}.{table}_dlq
(
    failed_at          DateTime('UTC'),
    failure_reason     String,
    failed_field       Nullable(String),
    stage              String,
    error_detail       String,
    attempts           Nullable(UInt32),
    source_topic       String,
    source_partition   Int32,
    source_offset      Int64,
    dlq_partition      Int32,
    dlq_offset         Int64,
    worker_instance    String,
    payload_sha256     String,
    mac_verified       Nullable(UInt8),
    raw_id             Nullable(String),
    cdr_id             Nullable(UUID),
    device_id          Nullable(String),
    caller_prefix      Nullable(String),
    original_payload   String,
    payload_truncated  UInt8,
    payload_as_text    String,
    unreadable         String,
    stored_at          DateTime('UTC')
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(stored_at)
ORDER BY (failure_reason, failed_at, dlq_partition, dlq_offset);

-- What analysts read: every column but the payload, which holds whole records, phone numbers
-- included. A view of the invoker's rights: the analyst role's column grants are what keep the
-- payload from it (docs/security.md).
CREATE VIEW IF NOT EXISTS {database}.{table}_dlq_summary
AS SELECT failed_at, failure_reason, failed_field, stage, error_detail, attempts, source_topic, source_partition,
    source_offset, dlq_partition, dlq_offset, worker_instance, payload_sha256, mac_verified, raw_id, cdr_id,
    device_id, caller_prefix, payload_truncated, payload_as_text, unreadable, stored_at
FROM {database}.{table}_dlq;
