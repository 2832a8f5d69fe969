// Consumer.committed, the tools' read of a group's offsets (audit, trace), on librdkafka's mock
// cluster: a coordinator that answers it is moving, as one does right after a broker restarts, is
// asked again within the read's deadline instead of failing the tool (seen once: audit's check of
// the DLQ table exited 1 on NOT_COORDINATOR in the broker-restart scenario of test/cluster/).
import { expect, setDefaultTimeout, test } from "bun:test";
import type { Pointer } from "bun:ffi";
import { KafkaError } from "../../src/errors.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { mockClusterWith, mockControls } from "../support/mock-cluster.ts";

setDefaultTimeout(60_000);

const OFFSET_FETCH = 9;
const COORDINATOR_LOAD_IN_PROGRESS = 14;
const NOT_COORDINATOR = 16;
const GROUP_AUTHORIZATION_FAILED = 30;

async function withGroup(fn: (read: () => bigint, pushErrors: (errors: number[]) => void) => void): Promise<void> {
  const topic = `committed-${Math.random().toString(36).slice(2, 8)}`;
  const { holder, bootstraps } = mockClusterWith(topic);
  const cluster = mockControls().rd_kafka_handle_mock_cluster(holder.handle) as Pointer;
  const c = new Consumer({ props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g` }, topics: [] });
  try {
    const read = () => c.committed([{ topic, partition: 0 }])[0]!.offset!;
    expect(read()).toBe(-1001n); // nothing committed: librdkafka's OFFSET_INVALID
    fn(read, (errors) => mockControls().rd_kafka_mock_push_request_errors_array(cluster, OFFSET_FETCH, errors.length, new Int32Array(errors)));
  } finally {
    await c.close();
    holder.close();
  }
}

test("a coordinator moving or loading is asked again within the deadline: the read answers", async () => {
  await withGroup((read, pushErrors) => {
    pushErrors([NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR]);
    expect(read()).toBe(-1001n);
  });
});

test("a refusal no retry can change still fails at once", async () => {
  await withGroup((read, pushErrors) => {
    pushErrors([GROUP_AUTHORIZATION_FAILED]);
    const t0 = performance.now();
    let thrown: unknown;
    try {
      read();
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(KafkaError);
    expect((thrown as KafkaError).message).toContain("GROUP_AUTHORIZATION_FAILED");
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});
