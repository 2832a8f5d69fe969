/**
 * Byte offsets of the librdkafka structs the binding reads, for x86_64 (LP64).
 * test/kafka/structs.test.ts compiles a C program against the installed headers and compares,
 * so an upgrade that moves a field fails loudly instead of reading garbage.
 */

/*
 * typedef struct rd_kafka_message_s {
 *   rd_kafka_resp_err_t err;   rd_kafka_topic_t *rkt;  int32_t partition;
 *   void *payload;  size_t len;  void *key;  size_t key_len;  int64_t offset;  void *_private;
 * } rd_kafka_message_t;
 */
export const MESSAGE = {
  size: 72,
  err: 0,
  rkt: 8,
  partition: 16,
  payload: 24,
  len: 32,
  key: 40,
  key_len: 48,
  offset: 56,
  _private: 64,
} as const;

/*
 * typedef struct rd_kafka_topic_partition_s {
 *   char *topic;  int32_t partition;  int64_t offset;  void *metadata;  size_t metadata_size;
 *   void *opaque;  rd_kafka_resp_err_t err;  void *_private;
 * } rd_kafka_topic_partition_t;
 */
export const TOPIC_PARTITION = {
  size: 64,
  topic: 0,
  partition: 8,
  offset: 16,
  metadata: 24,
  metadata_size: 32,
  opaque: 40,
  err: 48,
  _private: 56,
} as const;

/* typedef struct rd_kafka_topic_partition_list_s { int cnt; int size; rd_kafka_topic_partition_t *elems; } */
export const TOPIC_PARTITION_LIST = { size: 16, cnt: 0, elems: 8 } as const;

/*
 * typedef struct rd_kafka_vu_s { rd_kafka_vtype_t vtype; union { ...; char _pad[64]; } u; } rd_kafka_vu_t;
 * Union members used: cstr / ptr at u+0; mem {ptr, size} at u+0, u+8; i32 / i at u+0; i64 at u+0;
 * header {name, val, size} at u+0, u+8, u+16.
 */
export const VU = { size: 72, vtype: 0, u: 8 } as const;

/* struct rd_kafka_metadata { int broker_cnt; brokers*; int topic_cnt; rd_kafka_metadata_topic *topics; ... } */
export const METADATA = { topic_cnt: 16, topics: 24 } as const;
/* typedef struct rd_kafka_metadata_topic { char *topic; int partition_cnt; partitions*; rd_kafka_resp_err_t err; } */
export const METADATA_TOPIC = { size: 32, topic: 0, partition_cnt: 8, partitions: 16, err: 24 } as const;
/* typedef struct rd_kafka_metadata_partition { int32_t id; rd_kafka_resp_err_t err; int32_t leader;
 *   int replica_cnt; int32_t *replicas; int isr_cnt; int32_t *isrs; } */
export const METADATA_PARTITION = { size: 40, replica_cnt: 12 } as const;

/** rd_kafka_vtype_t */
export const VTYPE = {
  END: 0,
  TOPIC: 1,
  RKT: 2,
  PARTITION: 3,
  VALUE: 4,
  KEY: 5,
  OPAQUE: 6,
  MSGFLAGS: 7,
  TIMESTAMP: 8,
  HEADER: 9,
  HEADERS: 10,
} as const;

/** Constants from rdkafka.h. */
export const RD = {
  PRODUCER: 0,
  CONSUMER: 1,
  CONF_OK: 0,
  MSG_F_COPY: 0x2,
  PARTITION_UA: -1,
  OFFSET_INVALID: -1001,
  EVENT_DR: 0x1,
  EVENT_LOG: 0x4,
  EVENT_ERROR: 0x8,
  EVENT_CREATETOPICS_RESULT: 100,
  EVENT_DELETETOPICS_RESULT: 101,
  EVENT_ALTERCONFIGS_RESULT: 103,
  EVENT_DESCRIBECONFIGS_RESULT: 104,
  EVENT_LISTCONSUMERGROUPOFFSETS_RESULT: 0x8000,
  EVENT_DESCRIBETOPICS_RESULT: 0x100000,
  EVENT_DESCRIBECONSUMERGROUPS_RESULT: 0x4000,
  EVENT_LISTOFFSETS_RESULT: 0x400000,
  /** rd_kafka_OffsetSpec_t: a ListOffsets entry's offset asks for the first offset, or the end. */
  OFFSET_SPEC_EARLIEST: -2,
  OFFSET_SPEC_LATEST: -1,
  ISOLATION_LEVEL_READ_COMMITTED: 1,
  RESOURCE_TOPIC: 2,
  RESOURCE_GROUP: 3,
  ADMIN_OP_ANY: 0,
  ERR_NO_ERROR: 0,
  ERR__PARTITION_EOF: -191,
  /** rd_kafka_destroy_flags: do not close the consumer (it was closed, or closing it timed out). */
  DESTROY_F_NO_CONSUMER_CLOSE: 0x8,
  ERR__BAD_MSG: -199,
  /**
   * An offset librdkafka passed over on purpose, handed out in its place by the project's build
   * (scripts/librdkafka/patches/passed-over-reports.patch): a control record, an aborted record.
   */
  ERR__NOOP: -141,
  ERR__BAD_COMPRESSION: -198,
  ERR__TIMED_OUT: -185,
  ERR__REVOKE_PARTITIONS: -174,
  ERR__ASSIGN_PARTITIONS: -175,
  ERR__UNKNOWN_TOPIC: -188,
  ERR__QUEUE_FULL: -184,
  ERR__NO_OFFSET: -168,
  ERR_TOPIC_ALREADY_EXISTS: 36,
  ERR_UNKNOWN_TOPIC_OR_PART: 3,
  ERR_TOPIC_AUTHORIZATION_FAILED: 29,
  ERR_GROUP_AUTHORIZATION_FAILED: 30,
  ERR_CLUSTER_AUTHORIZATION_FAILED: 31,
} as const;
