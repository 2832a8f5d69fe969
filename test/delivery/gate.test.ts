import { expect, setDefaultTimeout, test } from "bun:test";
import { Gate } from "../../src/delivery/gate.ts";

setDefaultTimeout(60_000);

const tp = (partition: number) => ({ topic: "cdr.raw", partition });

function consumer(partitions: number[]) {
  const paused = new Set<number>();
  return {
    paused,
    assignment: partitions.map(tp),
    pause: (ps: readonly { partition: number }[]) => ps.forEach((p) => paused.add(p.partition)),
    resume: (ps: readonly { partition: number }[]) => ps.forEach((p) => paused.delete(p.partition)),
  };
}

test("reasons add up: lifting one never resumes a partition another still holds", () => {
  const c = consumer([0, 1, 2]);
  const g = new Gate(c);
  g.close([tp(1)], "replay-check");
  g.closeAll("clickhouse");
  expect([...c.paused].sort()).toEqual([0, 1, 2]);
  g.openAll("clickhouse");
  expect([...c.paused]).toEqual([1]); // still under its replay check
  g.closeAll("breaker");
  g.open([tp(1)], "replay-check");
  expect([...c.paused].sort()).toEqual([0, 1, 2]); // the breaker holds every partition
  expect(g.count("replay-check")).toBe(0);
});

test("a partition assigned while a reason for every partition holds starts paused; a revoked one takes its reasons with it", () => {
  const c = consumer([0]);
  const g = new Gate(c);
  g.closeAll("clickhouse");
  g.assigned([tp(5)]);
  expect(c.paused.has(5)).toBe(true);
  g.close([tp(0)], "replay-check");
  g.forget([tp(0)]);
  expect(g.count("replay-check")).toBe(0);
});

test("what holds a partition is named: every partition's reasons and its own, none once lifted", () => {
  const c = consumer([0, 1]);
  const g = new Gate(c);
  g.close([tp(1)], "replay-check");
  g.closeAll("membership");
  expect([g.heldBy(0), g.heldBy(1)]).toEqual([["membership"], ["membership", "replay-check"]]);
  g.openAll("membership");
  g.open([tp(1)], "replay-check");
  expect([g.heldBy(0), g.heldBy(1), [...c.paused]]).toEqual([[], [], []]);
});
