// librdkafka stamps its membership facts with its own clock (CLOCK_MONOTONIC µs); the lease runs on
// performance.now. A fact is placed by its age, read on both clocks when the statistics are read:
// a step between the clocks (a host suspended, counted by one and not the other) moves no fact.
import { expect, setDefaultTimeout, test } from "bun:test";
import { rdClockUs } from "../../src/kafka/libc.ts";
import { rdToMono } from "../../src/kafka/rd-clock.ts";

setDefaultTimeout(60_000);

test("a fact keeps its age across a step between the two clocks", () => {
  const clocks = { rd: 1_000_000_000, mono: 5_000 }; // µs, ms
  const pair = { rdNowUs: () => clocks.rd, monoNowMs: () => clocks.mono };
  // A heartbeat accepted 200 ms ago, read now.
  expect(rdToMono(pair)(clocks.rd - 200_000)).toBe(4_800);
  // The host sleeps 60 s: librdkafka's clock stops, the process's goes on (or the reverse).
  clocks.mono += 60_000;
  clocks.rd += 1_000_000; // then 1 s passes on both
  clocks.mono += 1_000;
  // The next heartbeat, accepted 300 ms before this reading: 300 ms old on the lease's clock too.
  expect(rdToMono(pair)(clocks.rd - 300_000)).toBe(clocks.mono - 300);
});

test("on this host the two clocks agree: librdkafka's now is the process's now, to a millisecond", () => {
  const before = performance.now();
  const at = rdToMono()(rdClockUs());
  const after = performance.now();
  expect(at).toBeGreaterThanOrEqual(before - 1);
  expect(at).toBeLessThanOrEqual(after + 1);
});
