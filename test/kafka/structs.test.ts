// The struct offsets the binding reads must match the headers of the librdkafka it loads: a library
// upgrade that moves a field fails here instead of corrupting memory.
import { expect, setDefaultTimeout, test } from "bun:test";
import { MESSAGE, METADATA, METADATA_PARTITION, METADATA_TOPIC, RD, TOPIC_PARTITION, TOPIC_PARTITION_LIST, VU } from "../../src/kafka/structs.ts";
import { run, ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

test("struct layouts match librdkafka's rdkafka.h", async () => {
  const src = `
#include <stdio.h>
#include <stddef.h>
#include <librdkafka/rdkafka.h>
#define F(s, f) printf("\\"%s.%s\\":%zu,", #s, #f, offsetof(s, f))
#define S(s) printf("\\"%s.size\\":%zu,", #s, sizeof(s))
int main(void) {
  printf("{");
  S(rd_kafka_message_t); F(rd_kafka_message_t, err); F(rd_kafka_message_t, rkt); F(rd_kafka_message_t, partition);
  F(rd_kafka_message_t, payload); F(rd_kafka_message_t, len); F(rd_kafka_message_t, key); F(rd_kafka_message_t, key_len);
  F(rd_kafka_message_t, offset); F(rd_kafka_message_t, _private);
  S(rd_kafka_topic_partition_t); F(rd_kafka_topic_partition_t, topic); F(rd_kafka_topic_partition_t, partition);
  F(rd_kafka_topic_partition_t, offset); F(rd_kafka_topic_partition_t, err); F(rd_kafka_topic_partition_t, _private);
  S(rd_kafka_topic_partition_list_t); F(rd_kafka_topic_partition_list_t, cnt); F(rd_kafka_topic_partition_list_t, elems);
  S(rd_kafka_vu_t); F(rd_kafka_vu_t, vtype); F(rd_kafka_vu_t, u);
  F(struct rd_kafka_metadata, topic_cnt); F(struct rd_kafka_metadata, topics);
  S(rd_kafka_metadata_topic_t); F(rd_kafka_metadata_topic_t, topic); F(rd_kafka_metadata_topic_t, partition_cnt); F(rd_kafka_metadata_topic_t, err);
  F(rd_kafka_metadata_topic_t, partitions); S(rd_kafka_metadata_partition_t); F(rd_kafka_metadata_partition_t, replica_cnt);
  printf("\\"end\\":0}");
  return 0;
}`;
  const dir = `${ROOT}/.local/structs-check`;
  await Bun.write(`${dir}/structs.c`, src);
  // The headers of the library the worker loads: the project's build (scripts/librdkafka/build.sh).
  await run(["cc", "-I", `${ROOT}/.local/librdkafka/include`, "-o", `${dir}/structs`, `${dir}/structs.c`]);
  const c = JSON.parse(await run([`${dir}/structs`])) as Record<string, number>;
  expect(c).toMatchObject({
    "rd_kafka_message_t.size": MESSAGE.size, "rd_kafka_message_t.err": MESSAGE.err, "rd_kafka_message_t.rkt": MESSAGE.rkt,
    "rd_kafka_message_t.partition": MESSAGE.partition, "rd_kafka_message_t.payload": MESSAGE.payload, "rd_kafka_message_t.len": MESSAGE.len,
    "rd_kafka_message_t.key": MESSAGE.key, "rd_kafka_message_t.key_len": MESSAGE.key_len, "rd_kafka_message_t.offset": MESSAGE.offset,
    "rd_kafka_message_t._private": MESSAGE._private,
    "rd_kafka_topic_partition_t.size": TOPIC_PARTITION.size, "rd_kafka_topic_partition_t.topic": TOPIC_PARTITION.topic,
    "rd_kafka_topic_partition_t.partition": TOPIC_PARTITION.partition, "rd_kafka_topic_partition_t.offset": TOPIC_PARTITION.offset,
    "rd_kafka_topic_partition_t.err": TOPIC_PARTITION.err, "rd_kafka_topic_partition_t._private": TOPIC_PARTITION._private,
    "rd_kafka_topic_partition_list_t.size": TOPIC_PARTITION_LIST.size, "rd_kafka_topic_partition_list_t.cnt": TOPIC_PARTITION_LIST.cnt,
    "rd_kafka_topic_partition_list_t.elems": TOPIC_PARTITION_LIST.elems,
    "rd_kafka_vu_t.size": VU.size, "rd_kafka_vu_t.vtype": VU.vtype, "rd_kafka_vu_t.u": VU.u,
    "struct rd_kafka_metadata.topic_cnt": METADATA.topic_cnt, "struct rd_kafka_metadata.topics": METADATA.topics,
    "rd_kafka_metadata_topic_t.size": METADATA_TOPIC.size, "rd_kafka_metadata_topic_t.topic": METADATA_TOPIC.topic,
    "rd_kafka_metadata_topic_t.partition_cnt": METADATA_TOPIC.partition_cnt, "rd_kafka_metadata_topic_t.err": METADATA_TOPIC.err,
    "rd_kafka_metadata_topic_t.partitions": METADATA_TOPIC.partitions,
    "rd_kafka_metadata_partition_t.size": METADATA_PARTITION.size, "rd_kafka_metadata_partition_t.replica_cnt": METADATA_PARTITION.replica_cnt,
  });
});

test("the error and event codes in RD are librdkafka's", async () => {
  const names: Array<[keyof typeof RD, string]> = [
    ["ERR__PARTITION_EOF", "RD_KAFKA_RESP_ERR__PARTITION_EOF"], ["ERR__TIMED_OUT", "RD_KAFKA_RESP_ERR__TIMED_OUT"],
    ["ERR__REVOKE_PARTITIONS", "RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS"], ["ERR__ASSIGN_PARTITIONS", "RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS"],
    ["ERR__UNKNOWN_TOPIC", "RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC"], ["ERR__QUEUE_FULL", "RD_KAFKA_RESP_ERR__QUEUE_FULL"],
    ["ERR__NO_OFFSET", "RD_KAFKA_RESP_ERR__NO_OFFSET"], ["ERR_TOPIC_ALREADY_EXISTS", "RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS"],
    ["ERR_UNKNOWN_TOPIC_OR_PART", "RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART"], ["EVENT_DR", "RD_KAFKA_EVENT_DR"], ["EVENT_ERROR", "RD_KAFKA_EVENT_ERROR"],
    ["ERR__BAD_MSG", "RD_KAFKA_RESP_ERR__BAD_MSG"], ["ERR__BAD_COMPRESSION", "RD_KAFKA_RESP_ERR__BAD_COMPRESSION"],
  ];
  const dir = `${ROOT}/.local/structs-check`;
  await Bun.write(`${dir}/codes.c`, `#include <stdio.h>\n#include <librdkafka/rdkafka.h>\nint main(void) {\n${names.map(([, c]) => `  printf("%d\\n", (int)${c});`).join("\n")}\n  return 0;\n}\n`);
  await run(["cc", "-I", `${ROOT}/.local/librdkafka/include`, "-o", `${dir}/codes`, `${dir}/codes.c`]);
  const values = (await run([`${dir}/codes`])).trim().split("\n").map(Number);
  expect(Object.fromEntries(names.map(([k], i) => [k, values[i]]))).toEqual(Object.fromEntries(names.map(([k]) => [k, RD[k]])));
});
