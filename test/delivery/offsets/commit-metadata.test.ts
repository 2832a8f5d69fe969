import { expect, setDefaultTimeout, test } from "bun:test";
import { commitMetadata, readCommitMetadata } from "../../../src/delivery/offsets/commit-metadata.ts";

setDefaultTimeout(60_000);

test("the worker's metadata reads back; none, another writer's or a newer version's reads as null", () => {
  expect(readCommitMetadata(commitMetadata(1_764_000_000_123.7))).toEqual({ since: 1_764_000_000_123, transactional: false });
  expect(readCommitMetadata(commitMetadata(5, true))).toEqual({ since: 5, transactional: true });
  expect(commitMetadata(1, true).length).toBeLessThan(64); // Kafka keeps up to 4096 bytes
  // A release that knows no transactions reads version 1 as before: the field is only added.
  expect(JSON.parse(commitMetadata(5, true))).toEqual({ cdr_worker: 1, since: 5, txn: 1 });
  for (const other of [undefined, "", "{}", "not json", '{"cdr_worker":2,"since":1}', '{"cdr_worker":1,"since":"1"}'])
    expect(readCommitMetadata(other)).toBeNull();
});
