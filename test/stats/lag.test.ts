import { expect, setDefaultTimeout, test } from "bun:test";
import { partitionLag } from "../../src/stats/lag.ts";

setDefaultTimeout(60_000);

test("lag is the high watermark minus the committed offset, never below 0, and unknown without either", () => {
  expect(partitionLag(120, 100)).toBe(20);
  expect(partitionLag(100, 120)).toBe(0); // a watermark older than the commit
  expect(partitionLag(null, 100)).toBeNull();
  expect(partitionLag(100, null)).toBeNull();
  expect(partitionLag(100, -1)).toBeNull(); // nothing committed yet
});
