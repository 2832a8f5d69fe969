/**
 * librdkafka's own mock cluster, from the library the worker loaded (dlopen shares it): the one place
 * a coordinator can be taken down at a chosen instant, and a broker that keeps whatever bytes a
 * ProduceRequest carries (test/support/raw-batch.ts).
 */
import { dlopen, FFIType, type Pointer } from "bun:ffi";
import { cstr, rdk } from "../../src/kafka/native.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { ROOT } from "./services.ts";

export function mockControls() {
  rdk();
  const { symbols } = dlopen(`${ROOT}/.local/librdkafka/lib/librdkafka.so.1`, {
    rd_kafka_handle_mock_cluster: { args: [FFIType.ptr], returns: FFIType.ptr },
    rd_kafka_mock_cluster_bootstraps: { args: [FFIType.ptr], returns: FFIType.cstring },
    rd_kafka_mock_topic_create: { args: [FFIType.ptr, FFIType.ptr, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    rd_kafka_mock_coordinator_set: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
    rd_kafka_mock_broker_set_down: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
    rd_kafka_consumer_group_metadata_new: { args: [FFIType.ptr], returns: FFIType.ptr },
    // The array form: bun:ffi calls no variadic function.
    rd_kafka_mock_push_request_errors_array: {
      args: [FFIType.ptr, FFIType.i16, FFIType.u64, FFIType.ptr],
      returns: FFIType.void,
    },
    // Variadic (err, rtt_ms pairs), called with one pair: integers go in registers either way on amd64.
    rd_kafka_mock_broker_push_request_error_rtts: {
      args: [FFIType.ptr, FFIType.i32, FFIType.i16, FFIType.u64, FFIType.i32, FFIType.i32],
      returns: FFIType.i32,
    },
  });
  return symbols;
}

/** A one-broker mock cluster held by a producer, with `topic` (one partition unless said); close the holder after. */
export function mockClusterWith(topic: string, partitions = 1): { holder: Producer; bootstraps: string } {
  const mock = mockControls();
  const holder = new Producer({ "test.mock.num.brokers": "1" });
  const cluster = mock.rd_kafka_handle_mock_cluster(holder.handle) as Pointer;
  const err = mock.rd_kafka_mock_topic_create(cluster, cstr(topic), partitions, 1);
  if (err !== 0) throw new Error(`mock topic ${topic}: error ${err}`);
  return { holder, bootstraps: String(mock.rd_kafka_mock_cluster_bootstraps(cluster)) };
}
