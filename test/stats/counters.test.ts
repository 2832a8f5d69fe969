import { expect, setDefaultTimeout, test } from "bun:test";
import { Counters, MAX_SERVICES } from "../../src/stats/counters.ts";

setDefaultTimeout(60_000);

const rows = (services: string[], rats: number[] = services.map(() => 6), partitions: number[] = services.map(() => 0)) => ({ services, rats, partitions });

test("service counts are capped so hostile svc values cannot grow memory: distinct values and their length", () => {
  const c = new Counters();
  const svcs = Array.from({ length: 500 }, (_, i) => `svc${i}`);
  c.recordInserted(rows(svcs), svcs.length);
  c.recordInserted(rows(["x".repeat(10_000), "voice"]), 2);
  expect(c.byService.size).toBeLessThanOrEqual(MAX_SERVICES + 1);
  expect([...c.byService.values()].reduce((a, n) => a + n, 0)).toBe(502);
  expect([...c.byService.keys()].every((k) => k.length <= 64)).toBe(true);
  expect(c.byService.get("other")).toBe(502 - MAX_SERVICES);
});

test("inserted rows count per partition, RAT and service, skipping the rows that went to the DLQ", () => {
  const c = new Counters();
  c.recordInserted(rows(["data", "voice", "data", "sms"], [1, 6, 9, 9], [0, 0, 2, 2]), 4, [1, 3]);
  expect(c.durableClickhouse).toBe(2);
  expect(c.partition(0).durableClickhouse).toBe(1);
  expect(c.partition(2).durableClickhouse).toBe(1);
  expect(c.byRat).toEqual({ "3G": 1, LTE_4G: 0, "5G_NR": 1 });
  expect(Object.fromEntries(c.byService)).toEqual({ data: 2 });
});

test("histograms report Prometheus' cumulative bucket counts, +Inf as the total", () => {
  const c = new Counters();
  for (const v of [0.01, 0.05, 0.3, 0.3, 7, 5000]) c.endToEndSeconds.observe(v);
  const at = (bound: number) => c.endToEndSeconds.counts[c.endToEndSeconds.bounds.indexOf(bound)];
  expect([at(0.05), at(0.25), at(0.5), at(10), at(1800)]).toEqual([2, 2, 4, 5, 5]);
  expect(c.endToEndSeconds.count).toBe(6);
  expect(c.endToEndSeconds.sum).toBeCloseTo(5007.66, 6);
});
