import { createClient } from "@clickhouse/client";
import { expect, setDefaultTimeout, test } from "bun:test";
import { Gate } from "../../src/delivery/gate.ts";
import type { Delivered } from "../../src/delivery/offsets/replay-check.ts";
import { Replays } from "../../src/delivery/replays.ts";
import { CdrWorkerError } from "../../src/errors.ts";
import { kafkaError } from "../../src/kafka/handle.ts";
import { Counters } from "../../src/stats/counters.ts";
import { waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const tp = (partition: number) => ({ topic: "cdr.raw", partition });

function setup(find: (partitions: number[]) => Promise<Map<number, Delivered>>) {
  const paused = new Set<number>();
  const gate = new Gate({
    assignment: [tp(0), tp(1)],
    pause: (ps) => ps.forEach((p) => paused.add(p.partition)),
    resume: (ps) => ps.forEach((p) => paused.delete(p.partition)),
  });
  const counters = new Counters();
  const fatal: unknown[] = [];
  let ready = 0;
  const r = new Replays({ findDelivered: find }, gate, counters, { onFatal: (e) => fatal.push(e), onReady: () => ready++, commitMarks: async () => {} });
  return { r, paused, counters, fatal, ready: () => ready };
}

test("partitions stay paused until the check answers; each delivered offset is skipped once, and nothing past the last", async () => {
  let answer!: (m: Map<number, Delivered>) => void;
  const s = setup(() => new Promise((resolve) => (answer = resolve)));
  s.r.check([tp(0), tp(1)]);
  expect([...s.paused].sort()).toEqual([0, 1]);
  expect(s.r.pending).toBe(2);
  answer(new Map([[0, { offsets: new Set([5, 7]), since: 1000 }]]));
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "check done");
  expect([...s.paused]).toEqual([]);
  expect([5, 6, 7, 7, 8].map((o) => s.r.delivered(0, o))).toEqual([true, false, true, false, false]);
  expect(s.r.delivered(1, 5)).toBe(false);
  expect(s.counters.replayChecks).toBe(1);
});

// The offsets table can lack rows the table holds (its view can fail after the table's write): what
// the check did not find below the end it saw is looked up again before it is sent.
test("records below the end the check saw are unsure until the first at or past it; a revoked partition forgets", async () => {
  const s = setup(async () => new Map([[0, { offsets: new Set([5]), since: 1000, unsureBelow: 9 }], [1, { offsets: new Set<number>(), since: 1000 }]]));
  s.r.check([tp(0), tp(1)]);
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "check done");
  expect([6, 8, 1].map((o) => s.r.unsure(o === 1 ? 1 : 0, o))).toEqual([true, true, false]);
  expect([s.r.unsure(0, 9), s.r.unsure(0, 8)]).toEqual([false, false]); // past the end: done with
  s.r.check([tp(0)]);
  await waitFor(() => (s.ready() === 2 ? true : undefined), 5000, "second check done");
  expect(s.r.unsure(0, 3)).toBe(true);
  s.r.forget([tp(0)]);
  expect(s.r.unsure(0, 3)).toBe(false);
});

// The simulation's freeze-position-below-check-commit: the consumer's position came from the group's
// commit when the partition was assigned; the last owner's transaction then moved that commit on
// before the check read it. The records between were dead-lettered again beside the last owner's.
test("regression: records below the commit the check read are skipped, whatever position the consumer started from", async () => {
  const s = setup(async () => new Map([[0, { offsets: new Set([33]), since: 1000, committed: 32 }]]));
  s.r.check([tp(0)]);
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "check done");
  expect([29, 30, 31, 32, 33, 34].map((o) => s.r.delivered(0, o))).toEqual([true, true, true, false, true, false]);
  expect(s.r.delivered(0, 30)).toBe(false); // past the commit once: the partition's position moved on
});

test("a failed check is tried again, its partitions paused meanwhile; a refusal no retry helps is fatal", async () => {
  // What the check's ClickHouse query throws when nothing answers: the client's own error.
  const nobody = createClient({ url: "http://127.0.0.1:1", request_timeout: 2000 });
  const unreachable = await nobody.query({ query: "SELECT 1" }).then(() => null, (e: unknown) => e);
  await nobody.close();
  expect(unreachable).toBeInstanceOf(Error);
  let calls = 0;
  const s = setup(async () => {
    if (++calls === 1) throw unreachable;
    return new Map();
  });
  s.r.check([tp(0)]);
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "retried");
  expect([calls, s.counters.replayCheckFailures, s.paused.size]).toEqual([2, 1, 0]);
  const f = setup(async () => {
    throw new CdrWorkerError("TOPOLOGY", "topic cdr.raw.dlq missing");
  });
  f.r.check([tp(0)]);
  await waitFor(() => (f.fatal.length === 1 ? true : undefined), 5000, "fatal");
  expect(f.paused.has(0)).toBe(true);
});

// During a rolling restart the group answers the check's commit or committed() with the codes a
// refused commit gets; Delivery retries those, and so does the check: they are not fatal.
test("regression: the group's rebalance answers (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) are retried, not fatal", async () => {
  // librdkafka's codes, as the binding throws them (rd_kafka_err2name names them).
  for (const code of [22, 25, 110]) {
    const refused = kafkaError("KAFKA_CLIENT", "committed", code);
    expect(refused.retryable).toBe(false);
    let calls = 0;
    const s = setup(async () => {
      if (++calls === 1) throw refused;
      return new Map();
    });
    s.r.check([tp(0)]);
    await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, `retried after ${refused.kafkaName}`);
    expect([s.fatal.length, calls, s.paused.size]).toEqual([0, 2, 0]);
  }
});

test("a check whose partitions were revoked meanwhile is dropped", async () => {
  let answer!: (m: Map<number, Delivered>) => void;
  const s = setup(() => new Promise((resolve) => (answer = resolve)));
  s.r.check([tp(0)]);
  s.r.forget([tp(0)]);
  answer(new Map([[0, { offsets: new Set([1]), since: 1000 }]]));
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "the answer arrived");
  expect(s.r.delivered(0, 1)).toBe(false);
  expect(s.r.pending).toBe(0);
});

// A new owner that commits inside the range it skips, then loses the partition: the next owner's
// check reads from that commit's since. A fresh time there would miss what the first owner stored
// earlier, and store it again; the checked since is kept until the position passes the range.
test("regression: a commit at or before the last skipped offset carries the since the check read from; past it, the tracker's", async () => {
  let answer!: (m: Map<number, Delivered>) => void;
  const s = setup(() => new Promise((resolve) => (answer = resolve)));
  s.r.check([tp(0), tp(1)]);
  answer(new Map([[0, { offsets: new Set([10, 12]), since: 1_000 }]]));
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "check done");
  expect(s.r.delivered(0, 10)).toBe(true);
  expect(s.r.commitSince(0, 11, 9_000)).toBe(1_000); // offset 12, skipped, is still ahead
  expect(s.r.commitSince(0, 12, 9_000)).toBe(1_000);
  expect(s.r.commitSince(1, 11, 9_000)).toBe(9_000); // nothing skipped there
  expect(s.r.commitSince(0, 13, 9_000)).toBe(9_000); // past the range
  expect(s.r.commitSince(0, 12, 9_000)).toBe(9_000); // and forgotten
});

test("an offset known from a proven envelope is skipped only when the record there has the envelope's payload", async () => {
  const { payloadDigest } = await import("../../src/dlq/provenance-mac.ts");
  const s = setup(async () => new Map([[0, { offsets: new Set([3, 4]), since: 1000, digests: new Map([[3, payloadDigest('{"a":1}')], [4, payloadDigest('{"b":2}')]]) }]]));
  s.r.check([tp(0)]);
  await waitFor(() => (s.ready() === 1 ? true : undefined), 5000, "check done");
  const record = (payload: string) => ({ ok: false as const, rejection: { reason: "malformed_json" as const, field: null, detail: "", payload, payloadIsObject: false } });
  expect(s.r.delivered(0, 3, record('{"a":1}'))).toBe(true); // the envelope's record
  expect(s.r.delivered(0, 4, record('{"b":"other"}'))).toBe(false); // another record at that offset: processed
  expect(s.counters.replayEnvelopesMismatched).toBe(1);
});
