// The simulation's services held to the real ones: the same scenario runs against ClickHouse 18.16,
// the 26.9 engine and the simulated server through the same ClickHouseWriter, and against the real
// broker and the simulated one through the same consumer surface, and what each answers is compared.
// What the invariants depend on: which rows a lost-answer read and a replay check find (their
// bounds: offsets, session_start_time, ingested_at), that a KILL of an insert that no longer runs
// is a no-op and leaves nothing in system.processes, that every query the writer sends is one the
// simulated server understands, that a paused partition resumes after the last record handed out,
// that a member cut off from the broker proves no heartbeat it sent during the cut until healed, and
// that cooperative-sticky and KIP-848 move a partition as the broker does: revoked by its owner first,
// then assigned.
import type { ClickHouseClient } from "@clickhouse/client";
import type { Pointer } from "bun:ffi";
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { createClickHouse } from "../../src/clickhouse/client.ts";
import { migrate } from "../../src/clickhouse/migrate.ts";
import { RowBinaryBuffer } from "../../src/clickhouse/row-binary.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import type { RowLookup } from "../../src/clickhouse/row-lookup.ts";
import type { Owned } from "../../src/delivery/offsets/replay-check.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Standing } from "../../src/kafka/heartbeat-proof.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { createTopic, deleteTopics, props } from "../support/kafka.ts";
import { KafkaCut } from "../support/cut.ts";
import { mockClusterWith, mockControls } from "../support/mock-cluster.ts";
import { CLICKHOUSE_SERVERS, KAFKA_BROKERS, ROOT, uniqueName, waitFor } from "../support/services.ts";
import { SimClickHouse } from "./clickhouse.ts";
import { RAW, SimConsumer, SimKafka } from "./kafka.ts";
import { Actor, EPOCH_MS, Scheduler } from "./scheduler.ts";
import { forEachLine } from "../support/lines.ts";

setDefaultTimeout(60_000);

const table = uniqueName("simfid").replace(/\W/g, "_");
const clients = CLICKHOUSE_SERVERS.map((s) =>
  createClickHouse({ url: s.url, user: "default", password: "", database: "default", table, requestTimeoutMs: 10_000 }),
);
const topics: string[] = [];
afterAll(async () => {
  for (const ch of clients) {
    for (const name of [`${table}_offsets_mv`, `${table}_offsets`, table])
      await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
    await ch.close();
  }
  if (topics.length > 0) await deleteTopics(...topics);
});

const decoded = decode(toJson(withFields({})), { phone: new PhoneNormalizer() });
if (!decoded.ok) throw new Error("fixture record must be valid");
const base = decoded;
const NOW = Math.floor(EPOCH_MS / 1000);

/** Rows of (partition, offset, session start, ingested at): the bounds each read has to get right. */
const ROWS: Array<[number, number, number, number]> = [
  [0, 10, NOW - 3600, NOW - 100], [0, 11, NOW - 7200, NOW - 100], [0, 12, NOW - 3600, NOW - 5000],
  [0, 13, 0, NOW - 100], [1, 10, NOW - 3600, NOW - 100], [1, 20, NOW - 86_400 * 40, NOW - 100],
  [2, 5, NOW - 60, NOW - 7200],
]; // prettier-ignore

function body(rows: typeof ROWS): Uint8Array {
  const b = new RowBinaryBuffer();
  for (const [p, o, start, at] of rows)
    b.add({ ...base.row, cdr_id: Bun.randomUUIDv5(`fid-${p}-${o}`, "dns"), raw_id: `fid-${p}-${o}`, session_start_time: start, session_end_time: start + 10 }, at, p, o);
  return b.bytes().slice();
}

// By the rows' seconds, however far apart (epoch 0 beside now), and in more runs than one read names.
const LOOKUPS: RowLookup[] = [
  { partitions: [0], minOffset: 10, maxOffset: 13, starts: [NOW - 7200, NOW - 3600] },
  { partitions: [0, 1], minOffset: 0, maxOffset: 100, starts: [0, NOW - 3600, NOW - 3599] },
  { partitions: [1, 2], minOffset: 10, maxOffset: 20, starts: [NOW - 86_400 * 40, NOW - 60] },
  { partitions: [0, 1, 2], minOffset: 0, maxOffset: 100, starts: Array.from({ length: 600 }, (_, i) => NOW - 1200 + 2 * i) },
];
const OWNED: Owned[][] = [
  [{ partition: 0, from: 11, since: (NOW - 100) * 1000 }],
  [{ partition: 0, from: 0, since: 0 }, { partition: 2, from: 5, since: (NOW - 100) * 1000 }],
  [{ partition: 1, from: 15, since: (NOW - 100) * 1000 }],
  // Closed at the partition's end as the check reads it: rows at or past it are left out.
  [{ partition: 0, from: 0, since: 0, to: 12 }, { partition: 1, from: 0, since: 0, to: 16 }],
];

interface Answers {
  rows: string[][];
  offsets: string[][];
}

/** The scenario, through a writer: insert, then each read; the kill of an ended insert on the way. */
async function scenario(w: ClickHouseWriter): Promise<Answers> {
  await w.insert(body(ROWS), ROWS.length);
  await w.endInserts([{ endpoint: 0, queryId: "cdr-worker:fidelity:ended" }]);
  await w.insertsEnded();
  const rows = [];
  for (const l of LOOKUPS) rows.push([...(await w.storedRows(l))].sort());
  const offsets = [];
  for (const o of OWNED)
    offsets.push([...(await w.storedOffsets(o))].flatMap(([p, os]) => os.map((x) => `${p}:${x}`)).sort());
  return { rows, offsets };
}

async function simulated(): Promise<Answers> {
  const sched = new Scheduler(1);
  // The real tables hold only the scenario's rows: no scan cost behind them.
  const ch = new SimClickHouse(sched, 1, `e2e.${table}`, 0);
  const a = new Actor("fidelity");
  const w = new ClickHouseWriter(
    [{ name: "sim", client: ch.client(a, 0, 10_000) as unknown as ClickHouseClient }],
    "e2e",
    table,
    { clock: sched.clockOf(a), requestTimeoutMs: 10_000 },
  );
  let out: Answers | null = null, error: unknown = null;
  scenario(w).then((r) => (out = r), (e) => (error = e));
  await sched.run(600_000, () => out !== null || error !== null);
  if (error) throw error;
  return out!;
}

describe("simulated ClickHouse against the real servers", () => {
  test.each(CLICKHOUSE_SERVERS.map((s, i) => [s.name, i] as const))(
    "%s: the lost-answer reads and the replay check's reads find the same rows, and a kill of an ended insert is a no-op",
    async (_name, i) => {
      const ch = clients[i]!;
      await migrate(ch, "e2e", table);
      const real = await scenario(new ClickHouseWriter(ch, "e2e", table, { requestTimeoutMs: 10_000 }));
      const sim = await simulated();
      expect(sim).toEqual(real);
      // The scenario asks something of every bound: each read finds some rows and leaves some out.
      for (const r of real.rows) expect(r.length).toBeGreaterThan(0);
      expect(real.rows.map((r) => r.length)).toEqual([3, 4, 1, 1]);
      expect(real.offsets.map((r) => r.length)).toEqual([2, 4, 1, 3]);
      await ch.command({ query: `TRUNCATE TABLE e2e.${table}` });
      await ch.command({ query: `TRUNCATE TABLE e2e.${table}_offsets` });
    },
  );
});

describe("simulated Kafka against the broker", () => {
  test("a paused partition drops what was fetched and resumes after the last record handed out", async () => {
    const topic = await createTopic("simfid", 1);
    topics.push(topic);
    const p = new Producer(props);
    for (let i = 0; i < 20; i++) await p.produce(topic, `r${i}`, { partition: 0 });
    p.close();
    // The real consumer: takes 5, pauses, resumes; the next record it hands out.
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("simfid") }, topics: [topic], maxBatch: 5 });
    const first = await waitFor(async () => {
      c.takeAssigned();
      const m = c.poll(5);
      if (m.length === 0) await c.waitForMessages(100);
      return m.length > 0 ? m : undefined;
    }, 30_000, "first records");
    const last = first[first.length - 1]!.offset;
    c.pause(c.assignment);
    c.resume(c.assignment);
    const next = await waitFor(async () => {
      const m = c.poll(1);
      if (m.length === 0) await c.waitForMessages(100);
      return m[0];
    }, 30_000, "the record after the pause");
    await c.close();
    // The simulated member, the same steps.
    const sched = new Scheduler(1);
    const kafka = new SimKafka(sched, { partitions: 1, sessionTimeoutMs: 10_000, maxPollIntervalMs: 30_000, prefetch: 300, messageTimeoutMs: 300_000 });
    for (let i = 0; i < 20; i++) kafka.append(0, new TextEncoder().encode(`r${i}`), EPOCH_MS);
    const sc = new SimConsumer(kafka, new Actor("fidelity"));
    await sched.run(5_000, () => sc.assignment.length > 0);
    const simFirst = sc.poll(first.length);
    sc.pause(sc.assignment);
    sc.resume(sc.assignment);
    const simNext = sc.poll(1);
    expect([simFirst.length, simFirst[simFirst.length - 1]!.offset, simNext[0]!.offset]).toEqual([first.length, last, next.offset]);
    expect(next.offset).toBe(last + 1);
    expect(sc.assignment[0]!.topic).toBe(RAW);
  });

  // cooperative-sticky and KIP-848: A owns all three partitions; B joins. A keeps what stays its own
  // and revokes only what moves; that partition reaches B once A's revocation has settled (and, on
  // the classic protocol, A has rejoined). KIP-848's session is the broker's (6 s here).
  test.each([
    ["cooperative-sticky", "cooperative", { "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "6000" }],
    ["consumer (KIP-848)", "consumer", { "group.protocol": "consumer" }],
  ] as const)("%s: a second member joins: the first keeps its share, revokes only what moves, and the second gets exactly that", async (_name, protocol, groupProps) => {
    type Surface = {
      takeAssigned(): Array<ReadonlyArray<{ partition: number }>>;
      readonly pendingRevoke: ReadonlyArray<{ partition: number }> | null;
      readonly assignment: ReadonlyArray<{ partition: number }>;
      completeRevoke(): void;
      poll(max?: number): unknown[];
    };
    /** What each member saw, in order: "+p" assigned, "-p" revoked, as partition numbers. */
    const step = (c: Surface, seen: string[]) => {
      c.poll(100);
      // librdkafka hands out an empty incremental assignment for a rebalance that adds nothing.
      for (const batch of c.takeAssigned()) if (batch.length > 0) seen.push(`+${batch.map((t) => t.partition).sort().join(",")}`);
      const revoking = c.pendingRevoke;
      if (revoking) {
        seen.push(`-${revoking.map((t) => t.partition).sort().join(",")}`);
        c.completeRevoke();
      }
    };
    const shape = (a: string[], b: string[], aOwns: number[], bOwns: number[]) => ({
      a: a.map((e) => `${e[0]}${e.slice(1).split(",").length}`),
      b: b.map((e) => `${e[0]}${e.slice(1).split(",").length}`),
      movedToB: a.filter((e) => e.startsWith("-")).map((e) => e.slice(1)).join(",") === bOwns.join(","),
      owned: [aOwns.length, bOwns.length],
    });
    const owns = (c: Surface) => c.assignment.map((t) => t.partition).sort();

    const topic = await createTopic("simfid", 3);
    topics.push(topic);
    const group = uniqueName("simfid");
    const cfg = { ...props, "group.id": group, ...groupProps };
    const ra = new Consumer({ props: cfg, topics: [topic] });
    const realA: string[] = [], realB: string[] = [];
    let rb: Consumer | null = null;
    let real: ReturnType<typeof shape>;
    try {
      await waitFor(async () => (step(ra, realA), await ra.waitForMessages(50), ra.assignment.length === 3 ? true : undefined), 30_000, "a owns all");
      rb = new Consumer({ props: cfg, topics: [topic] });
      await waitFor(async () => {
        step(ra, realA);
        step(rb!, realB);
        await ra.waitForMessages(20);
        return rb!.assignment.length === 1 && ra.assignment.length === 2 && !ra.pendingRevoke ? true : undefined;
      }, 45_000, "b given what a revoked");
      real = shape(realA, realB, owns(ra), owns(rb));
    } finally {
      await ra.close();
      await rb?.close();
    }

    const sched = new Scheduler(3);
    const kafka = new SimKafka(sched, { partitions: 3, sessionTimeoutMs: 6_000, maxPollIntervalMs: 30_000, prefetch: 300, messageTimeoutMs: 300_000, protocol });
    const sa = new SimConsumer(kafka, new Actor("a"));
    const simA: string[] = [], simB: string[] = [];
    await sched.run(10_000, () => (step(sa, simA), sa.assignment.length === 3));
    const sb = new SimConsumer(kafka, new Actor("b"));
    await sched.run(60_000, () => {
      step(sa, simA);
      step(sb, simB);
      return sb.assignment.length === 1 && sa.assignment.length === 2 && !sa.pendingRevoke;
    });
    const sim = shape(simA, simB, owns(sa), owns(sb));
    expect(sim).toEqual(real);
    expect(real).toEqual({ a: ["+3", "-1"], b: ["+1"], movedToB: true, owned: [2, 1] });
  });

  // KIP-848: A owns all three partitions and holds the revocation B's join asks of it (as a worker
  // whose ClickHouse is away does). Past the rebalance timeout (max.poll.interval.ms) the broker
  // fences A and gives B everything; librdkafka defers the fence while A's revocation is pending:
  // no loss is declared, no heartbeat accepted, and A's standing shows the refusal. Once A completes
  // the revocation it loses the rest and rejoins.
  test("consumer (KIP-848): a revocation held past the rebalance timeout: fenced, no loss declared while held, the refusal in the standing; completed, the rest is lost and the member rejoins", async () => {
    type Surface = {
      takeAssigned(): Array<ReadonlyArray<{ partition: number }>>;
      readonly pendingRevoke: ReadonlyArray<{ partition: number }> | null;
      readonly revokeLost: boolean;
      readonly assignment: ReadonlyArray<{ partition: number }>;
      completeRevoke(): void;
      poll(max?: number, revoking?: boolean): unknown[];
    };
    /** A's observations while it holds its first revocation, and after. */
    const watch = () => {
      const o = { held: null as string | null, lostWhileHeld: false, refusedWhileHeld: [] as number[], acceptedAfterRefusal: false, released: false, lostAfter: false, rejoined: false };
      const standing = (s: Standing) => {
        if (!o.held || o.released) return;
        if (s.kind === "refused" && !o.refusedWhileHeld.includes(s.err)) o.refusedWhileHeld.push(s.err);
        if (s.kind === "accepted" && o.refusedWhileHeld.length > 0) o.acceptedAfterRefusal = true;
      };
      const step = (c: Surface) => {
        c.poll(100, true);
        for (const batch of c.takeAssigned()) if (o.released && batch.length > 0) o.rejoined = true;
        const revoking = c.pendingRevoke;
        if (!revoking) return;
        if (!o.held) o.held = revoking.map((t) => t.partition).join(",");
        if (!o.released) {
          o.lostWhileHeld ||= c.revokeLost;
          // Released once the refusal is heard, as the worker does (delivery's removedFromGroup).
          if (o.refusedWhileHeld.length === 0) return;
          o.released = true;
          c.completeRevoke();
          return;
        }
        o.lostAfter ||= c.revokeLost || revoking.length > 0;
        c.completeRevoke();
      };
      return { o, standing, step };
    };
    const summary = (o: ReturnType<typeof watch>["o"]) => ({
      heldOne: o.held?.split(",").length,
      lostWhileHeld: o.lostWhileHeld,
      fencedWhileHeld: o.refusedWhileHeld.length > 0 && o.refusedWhileHeld.every((e) => e === 110 || e === 25),
      acceptedAfterRefusal: o.acceptedAfterRefusal,
      lostAfter: o.lostAfter,
      rejoined: o.rejoined,
    });

    const topic = await createTopic("simfid", 3);
    topics.push(topic);
    const cfg = { ...props, "group.id": uniqueName("simfid"), "group.protocol": "consumer", "max.poll.interval.ms": "10000", "statistics.interval.ms": "230" };
    const ra = new Consumer({ props: cfg, topics: [topic] });
    const real = watch();
    ra.onStanding(real.standing);
    let rb: Consumer | null = null;
    try {
      await waitFor(async () => (ra.poll(100), ra.takeAssigned(), await ra.waitForMessages(50), ra.assignment.length === 3 ? true : undefined), 30_000, "a owns all");
      rb = new Consumer({ props: cfg, topics: [topic] });
      await waitFor(async () => {
        rb!.poll(100);
        rb!.takeAssigned();
        real.step(ra);
        await ra.waitForMessages(20);
        return real.o.rejoined ? true : undefined;
      }, 60_000, "a fenced, released, rejoined");
    } finally {
      await ra.close();
      await rb?.close();
    }

    const sched = new Scheduler(5);
    const kafka = new SimKafka(sched, { partitions: 3, sessionTimeoutMs: 6_000, maxPollIntervalMs: 10_000, prefetch: 300, messageTimeoutMs: 300_000, protocol: "consumer" });
    const sa = new SimConsumer(kafka, new Actor("a"));
    const sim = watch();
    sa.onStanding(sim.standing);
    await sched.run(10_000, () => (sa.poll(100), sa.takeAssigned(), sa.assignment.length === 3));
    const sb = new SimConsumer(kafka, new Actor("b"));
    await sched.run(sched.now + 60_000, () => {
      sb.poll(100);
      sb.takeAssigned();
      sim.step(sa);
      return sim.o.rejoined;
    });
    expect(summary(sim.o)).toEqual(summary(real.o));
    expect(summary(real.o)).toEqual({ heldOne: 1, lostWhileHeld: false, fencedWhileHeld: true, acceptedAfterRefusal: false, lostAfter: true, rejoined: true });
  });

  // A heartbeat answered late (a far broker, a quota: test/kafka/heartbeat-facts.test.ts on the mock
  // cluster, the one place an answer's delay can be chosen) is dated by its sending, and refuses
  // nothing; the simulated member under its slow-answers fault, the same.
  test("a heartbeat answered 1.5 s late: accepted, dated by its sending, no refusal", async () => {
    type Seen = Standing & { at: number };
    // A proof's age when it is first seen: the slow one's is the delay of its answer, when it is
    // dated by its sending; dated by its arrival, no proof is ever first seen that old.
    const summary = (standings: Seen[], slowFrom: number) => {
      const firstSeen = new Map<number, number>();
      for (const s of standings) if (s.kind === "accepted" && !firstSeen.has(s.sentAfter)) firstSeen.set(s.sentAfter, s.at);
      return {
        slowDatedBySending: [...firstSeen].some(([sent, at]) => at > slowFrom && at - sent >= 1_500),
        refused: standings.some((s) => s.at > slowFrom && s.kind === "refused"),
      };
    };
    const topic = `simfid-slow-${crypto.randomUUID()}`;
    const { holder, bootstraps } = mockClusterWith(topic);
    const cluster = mockControls().rd_kafka_handle_mock_cluster(holder.handle) as Pointer;
    const c = new Consumer({
      props: { "bootstrap.servers": bootstraps, "group.id": `${topic}-g`, "statistics.interval.ms": "100", "session.timeout.ms": "6000", "heartbeat.interval.ms": "200" },
      topics: [topic],
    });
    const standings: Seen[] = [];
    c.onStanding((s) => standings.push({ ...s, at: performance.now() }));
    let real: ReturnType<typeof summary>;
    try {
      await waitFor(async () => (c.poll(), await c.waitForMessages(50), standings.some((s) => s.kind === "accepted") ? true : undefined), 30_000, "a heartbeat accepted");
      const slowFrom = performance.now();
      expect(mockControls().rd_kafka_mock_broker_push_request_error_rtts(cluster, 1, 12 /* Heartbeat */, 1, 0, 1_500)).toBe(0);
      await waitFor(async () => (c.poll(), await c.waitForMessages(50), summary(standings, slowFrom).slowDatedBySending ? true : undefined), 30_000, "the slow answer");
      real = summary(standings, slowFrom);
    } finally {
      await c.close();
      holder.close();
    }
    const sched = new Scheduler(7);
    const kafka = new SimKafka(sched, { partitions: 1, sessionTimeoutMs: 6_000, maxPollIntervalMs: 30_000, prefetch: 300, messageTimeoutMs: 300_000 });
    const actor = new Actor("fidelity");
    const sc = new SimConsumer(kafka, actor);
    const simStandings: Seen[] = [];
    sc.onStanding((s) => simStandings.push({ ...s, at: sched.now }));
    const polling = () => {
      sc.poll(100);
      sched.at(100, polling, actor);
    };
    sched.at(100, polling, actor);
    await sched.run(30_000, () => simStandings.some((s) => s.kind === "accepted"));
    const simSlowFrom = sched.now;
    // One heartbeat's answer slow, as the mock cluster's one delayed answer.
    kafka.slowAnswers.set(actor.name, { until: simSlowFrom + 400, extraMs: 1_500 });
    await sched.run(simSlowFrom + 30_000, () => summary(simStandings, simSlowFrom).slowDatedBySending);
    const sim = summary(simStandings, simSlowFrom);
    expect(sim).toEqual(real);
    expect(real).toEqual({ slowDatedBySending: true, refused: false });
  });

  test("a member cut off for half a session: no heartbeat sent after the cut is proven before the heal; proofs again after it", async () => {
    // The real member, in a cgroup the test cuts off from the broker (test/support/heartbeat-member.ts).
    const topic = await createTopic("simfid", 1);
    topics.push(topic);
    const cut = new KafkaCut(Number(KAFKA_BROKERS.split(",")[0]!.split(":").at(-1)));
    const group = uniqueName("simfid");
    const member = Bun.spawn(cut.command(["bun", `${ROOT}/test/support/heartbeat-member.ts`, KAFKA_BROKERS, topic, group]), {
      stdout: "pipe",
      stderr: "inherit",
    });
    const proofs: Array<{ proof: number; at: number }> = [];
    const reading = forEachLine(member.stdout, (l) => void (l.startsWith("{") && proofs.push(JSON.parse(l))));
    let real: ReturnType<typeof cutSummary>;
    try {
      await waitFor(() => (proofs.length >= 2 ? true : undefined), 30_000, "heartbeats proven before the cut");
      await cut.cut();
      const cutAt = Date.now();
      // The cut's length is the scenario: half of the member's session.timeout.ms (6 s).
      await Bun.sleep(3_000);
      const healAt = Date.now();
      await cut.heal();
      await waitFor(() => (proofs.some((p) => p.proof > healAt) ? true : undefined), 20_000, "a heartbeat proven after the heal");
      real = cutSummary(proofs, cutAt, healAt);
    } finally {
      member.kill();
      await member.exited;
      await reading;
      await cut.remove([member.pid]);
    }
    // The simulated member, the same steps on the virtual clock.
    const sched = new Scheduler(3);
    const kafka = new SimKafka(sched, { partitions: 1, sessionTimeoutMs: 6_000, maxPollIntervalMs: 30_000, prefetch: 300, messageTimeoutMs: 300_000 });
    const actor = new Actor("fidelity");
    const sc = new SimConsumer(kafka, actor);
    const simProofs: Array<{ proof: number; at: number }> = [];
    sc.onStanding((s) => s.kind === "accepted" && simProofs.push({ proof: s.sentAfter, at: sched.now }));
    // Polled as the real member is: the statistics are served by its polls.
    const polling = () => {
      sc.poll(100);
      sched.at(100, polling, actor);
    };
    sched.at(100, polling, actor);
    await sched.run(30_000, () => simProofs.length >= 2);
    kafka.cut(actor);
    const simCutAt = sched.now;
    await sched.run(simCutAt + 3_000);
    const simHealAt = sched.now;
    kafka.heal(actor);
    await sched.run(simHealAt + 20_000, () => simProofs.some((p) => p.proof > simHealAt));
    const sim = cutSummary(simProofs, simCutAt, simHealAt);
    expect(sim).toEqual(real);
    expect(real).toEqual({ beforeCut: true, sentAfterCutProvenWhileCut: 0, provenAfterHeal: true, eachBeforeItCame: true });
  });
});

/** What a member's proofs say of a cut: the same for the real member and the simulated one. */
function cutSummary(proofs: ReadonlyArray<{ proof: number; at: number }>, cutAt: number, healAt: number) {
  return {
    beforeCut: proofs.some((p) => p.at < cutAt),
    sentAfterCutProvenWhileCut: proofs.filter((p) => p.proof >= cutAt && p.at < healAt).length,
    provenAfterHeal: proofs.some((p) => p.proof > healAt),
    eachBeforeItCame: proofs.every((p) => p.proof < p.at),
  };
}

describe("an insert past its max_execution_time, simulated against the 26.9 engine", () => {
  const life = `${table}_life`;
  const i = CLICKHOUSE_SERVERS.findIndex((s) => s.version.test("26.9."));
  /** What the writer and the table show of it: the answer, the attempt's bound, the rows the table holds. */
  const outcome = async (w: ClickHouseWriter, tableRows: () => Promise<number>) => {
    const e = await w.insert(body(ROWS), ROWS.length).then(() => null, (err: unknown) => err as { serverCode: number | null; kind: string; mayHaveStored: boolean; attempts: Array<{ endedBy?: number }> });
    return { code: e?.serverCode, kind: e?.kind, mayHaveStored: e?.mayHaveStored, bounded: e?.attempts[0]?.endedBy !== undefined, rows: await tableRows() };
  };

  test("both end it at the limit, answer TIMEOUT_EXCEEDED, bound the attempt and hold the table's rows", async () => {
    const ch = clients[i]!;
    await migrate(ch, "e2e", life);
    try {
      // The engine's insert outlives 1 s in a view that sleeps (2.8 s); the simulated one is slow.
      await ch.command({ query: `CREATE TABLE e2e.${life}_sink (x UInt8) ENGINE = MergeTree ORDER BY x` });
      await ch.command({ query: `CREATE MATERIALIZED VIEW e2e.${life}_slow TO e2e.${life}_sink AS SELECT sleepEachRow(0.4) AS x FROM e2e.${life}` });
      const count = async () => Number((await (await ch.query({ query: `SELECT count() FROM e2e.${life}`, format: "TabSeparated" })).text()).trim());
      const real = await outcome(new ClickHouseWriter(ch, "e2e", life, { requestTimeoutMs: 2_000 }), count);

      const sched = new Scheduler(1);
      const sim = new SimClickHouse(sched, 1, `e2e.${life}`, 0, "26.9.2.1");
      sim.faults[0]!.slowUntil = Number.POSITIVE_INFINITY;
      const a = new Actor("fidelity");
      const w = new ClickHouseWriter([{ name: "sim", client: sim.client(a, 0, 2_000) as unknown as ClickHouseClient }], "e2e", life, { clock: sched.clockOf(a), requestTimeoutMs: 2_000 });
      let simulated: Awaited<ReturnType<typeof outcome>> | null = null;
      outcome(w, async () => sim.rows.length).then((r) => (simulated = r));
      await sched.run(600_000, () => simulated !== null);

      expect(simulated!).toEqual(real);
      expect(real).toEqual({ code: 159, kind: "transient", mayHaveStored: true, bounded: true, rows: ROWS.length });
    } finally {
      for (const name of [`${life}_slow`, `${life}_sink`, `${life}_offsets_mv`, `${life}_offsets`, life])
        await ch.command({ query: `DROP TABLE IF EXISTS e2e.${name}` }).catch(() => {});
    }
  });
});
