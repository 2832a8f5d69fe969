// librdkafka's per-partition fetch state, read from its statistics JSON as STATISTICS.md lays it out.
import { expect, setDefaultTimeout, test } from "bun:test";
import { partitionFetches } from "../../src/kafka/fetch-state.ts";

setDefaultTimeout(60_000);

const partition = (fetch_state: string, next_offset: number, fetchq_cnt: number) => ({
  partition: 0, leader: 1, desired: true, fetch_state, next_offset, app_offset: -1001, fetchq_cnt, hi_offset: 120,
});

test("each partition of the topic: its fetch state, next offset and queued records; the unassigned pseudo-partition left out", () => {
  const stats = {
    topics: {
      "cdr.raw": { partitions: { "0": partition("active", 100, 7), "1": partition("offset-query", -2, 0), "-1": partition("none", -1001, 0) } },
      other: { partitions: { "0": partition("active", 5, 0) } },
    },
  };
  expect([...partitionFetches(stats, "cdr.raw")!]).toEqual([
    [0, { state: "active", nextOffset: 100, queued: 7 }],
    [1, { state: "offset-query", nextOffset: -2, queued: 0 }],
  ]);
});

test("statistics that do not name the topic give nothing, and no shape throws", () => {
  expect(partitionFetches({ topics: {} }, "cdr.raw")).toBeNull();
  for (const stats of [null, 3, "x", [], { topics: [] }, { topics: { "cdr.raw": { partitions: null } } }])
    expect(partitionFetches(stats, "cdr.raw")).toBeNull();
  const odd = { topics: { "cdr.raw": { partitions: { "0": { fetch_state: 1 }, x: partition("active", 1, 0), "2": [] } } } };
  expect(partitionFetches(odd, "cdr.raw")!.size).toBe(0);
});
