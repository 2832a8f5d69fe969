// librdkafka stamps its membership facts with its own clock (CLOCK_MONOTONIC µs); the lease runs on
// performance.now. The offset between them is measured at each statistics reading: a step between
// the clocks (a host suspended, counted by one and not the other) moves no fact's age, and jitter
// of a measurement moves no fact at all.
import { expect, setDefaultTimeout, test } from "bun:test";
import { rdClockUs } from "../../src/kafka/libc.ts";
import { RdClock } from "../../src/kafka/rd-clock.ts";

setDefaultTimeout(60_000);

test("a fact keeps its age across a step between the two clocks; one fact reads the same at every reading", () => {
  const clocks = { rd: 1_000_000_000, mono: 5_000 }; // µs, ms
  const rd = new RdClock({ rdNowUs: () => clocks.rd, monoNowMs: () => clocks.mono });
  // A heartbeat accepted 200 ms ago, read now.
  const accepted = clocks.rd - 200_000;
  expect(rd.toMono()(accepted)).toBe(4_800);
  // Read again a few microseconds of jitter later: the same instant.
  clocks.mono += 0.004;
  expect(rd.toMono()(accepted)).toBe(4_800);
  // The host sleeps 60 s: librdkafka's clock stops, the process's goes on (or the reverse).
  clocks.mono += 60_000;
  clocks.rd += 1_000_000; // then 1 s passes on both
  clocks.mono += 1_000;
  // The next heartbeat, accepted 300 ms before this reading: 300 ms old on the lease's clock too.
  expect(rd.toMono()(clocks.rd - 300_000)).toBeCloseTo(clocks.mono - 300, 6);
});

test("on this host the two clocks agree: librdkafka's now is the process's now, to a millisecond", () => {
  const before = performance.now();
  const at = new RdClock().toMono()(rdClockUs());
  const after = performance.now();
  expect(at).toBeGreaterThanOrEqual(before - 1);
  expect(at).toBeLessThanOrEqual(after + 1);
});
