/**
 * One simulation run: the real worker (Worker, Delivery, the flush and insert-once path,
 * ClickHouseWriter's endpoint loop, DlqPublisher, the replay check) in one or more worker
 * processes against simulated Kafka and ClickHouse on a virtual clock, with a schedule's faults
 * applied at their instants. Afterwards the invariants are checked and every violation is named
 * with what caused it (its signature), the offsets it concerns and the log of the run.
 *
 * A worker that stops on a fatal error is started again a second later, as a supervisor would.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { decode } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { HEARTBEAT_INTERVAL_MS } from "../../src/cli/kafka-clients.ts";
import { ClickHouseWriter } from "../../src/clickhouse/writer.ts";
import { Delivery } from "../../src/delivery/delivery.ts";
import { findDelivered } from "../../src/delivery/offsets/replay-check.ts";
import type { CommitMarks } from "../../src/delivery/replays.ts";
import { deadLetteredOffsets } from "../../src/dlq/delivered.ts";
import { envelopeSource } from "../../src/dlq/envelope.ts";
import { DlqPublisher } from "../../src/dlq/publisher.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { setLogLevel, setLogSink } from "../../src/log.ts";
import { Counters } from "../../src/stats/counters.ts";
import { Worker } from "../../src/worker/worker.ts";
import { SimClickHouse, type StoredRow } from "./clickhouse.ts";
import { DLQ, RAW, type DlqRecord, SimConsumer, SimDlqReader, SimKafka, SimTransactions, simLookup } from "./kafka.ts";
import { TransactionalCommits } from "../../src/delivery/offsets/transactional-commits.ts";
import { Actor, EPOCH_MS, Scheduler } from "./scheduler.ts";
import { faultsEnd, normalize, type Fault, type Schedule } from "./schedule.ts";

export const SESSION_TIMEOUT_MS = 10_000;
const MAX_POLL_INTERVAL_MS = 30_000;
const REQUEST_TIMEOUT_MS = 10_000;
/** transaction.timeout.ms, the worker's default. */
const TXN_TIMEOUT_MS = 10_000;
const PARTITIONS = 3;
const BATCH_SIZE = 50;
const BACKLOG_ROWS = 100;
const CONCURRENCY = 2;
/** The longest pause between two replay checks, and the longest wait of the retry policy. */
const LONGEST_BACKOFF_MS = 30_000;
/** After the faults, how long the run may take to deliver everything (backoff, one check, the retries). */
const SETTLE_MS = LONGEST_BACKOFF_MS + 60_000;
/** Once everything is committed, how long the run goes on for late effects (held sends, thawed zombies). */
const AFTERMATH_MS = 30_000;

export interface Violation {
  /** The invariant and what broke it: `stored-twice/failover`, `dead-lettered-twice/held-send`, … */
  signature: string;
  partition?: number;
  offset?: number;
  detail: string;
}

export interface RunReport {
  schedule: Schedule;
  violations: Violation[];
  /**
   * Offsets both stored and dead-lettered by the spec's exhausted path, their rows unreadable for
   * every endpoint's trouble: a lost answer's rows, or rows a partition's last owner stored that the
   * offsets table lacks (docs/internals.md "Stored and dead-lettered").
   */
  exhaustedUnknown: number;
  records: number;
  stored: number;
  envelopes: number;
  virtualMs: number;
  events: number;
  /** The run's log lines, each prefixed with the process it came from. */
  log: string[];
}

interface Slot {
  proc: Proc | null;
  started: number;
}

interface Proc {
  actor: Actor;
  worker: Worker;
  consumer: SimConsumer;
  delivery: Delivery;
  ended: boolean;
  /** How long after a clean exit the supervisor starts the next process (a restart's). */
  restartMs: number;
}

export async function simulate(input: Schedule): Promise<RunReport> {
  const s = normalize(input);
  const sched = new Scheduler(s.seed);
  const kafka = new SimKafka(sched, {
    partitions: PARTITIONS,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    maxPollIntervalMs: MAX_POLL_INTERVAL_MS,
    prefetch: 300,
    messageTimeoutMs: 300_000,
    protocol: s.protocol ?? "eager",
  });
  const ch = new SimClickHouse(sched, s.endpoints, undefined, undefined, s.clickhouse);
  ch.ownerOf = (p) => kafka.ownerOf(p);
  const phone = new PhoneNormalizer({ cacheSize: 10_000 });
  const violations: Violation[] = [];
  const lines: string[] = [];
  let current: Actor | null = null;
  const unread: UnreadRows[] = [];
  /** Each endpoint's trouble as the faults made it, for one worker (a cut) or for all. */
  const troubles: Trouble[] = [];

  // Which process a log line comes from: the actor of the event that ran last (between two events
  // only what that event started runs).
  setLogLevel("info");
  setLogSink((line) => {
    const who = current?.name ?? "-";
    if (lines.length < 20_000) lines.push(`${(sched.now / 1000).toFixed(3)} ${who} ${line}`);
    if (current && line.includes("cannot be read") && line.includes("may also be stored"))
      unread.push({ actor: current.name, at: sched.now, offsets: (JSON.parse(line) as { offsets: string[] }).offsets });
  });
  const rejections: unknown[] = [];
  const onRejection = (e: unknown) => void rejections.push(e);
  process.on("unhandledRejection", onRejection);

  const durable = new Durability(kafka, ch);
  kafka.onCommit = (c) => {
    const undurable = durable.firstUndurable(c.partition, c.offset);
    if (undurable !== null)
      violations.push({
        signature: "commit-past-undurable",
        partition: c.partition,
        offset: undurable,
        detail: `${c.member} committed ${c.offset} at ${c.at} ms while offset ${undurable} was neither stored nor dead-lettered`,
      });
  };

  // The records, produced evenly over produceMs, round robin over the partitions.
  const gen = new SyntheticCdrs({
    seed: s.seed,
    invalidShare: s.invalidShare,
    callers: 200,
    idPrefix: `sim${s.seed}-`,
    now: Math.floor(EPOCH_MS / 1000),
  });
  const enc = new TextEncoder();
  for (let i = 0; i < s.records; i++) {
    let text = gen.next().text;
    if (s.epochZero && i === Math.floor(s.records / 2)) text = epochZero(text);
    const at = Math.floor((i * s.produceMs) / s.records);
    sched.at(at, () => kafka.append(i % PARTITIONS, enc.encode(text), EPOCH_MS + sched.now));
  }

  const slots: Slot[] = Array.from({ length: s.workers }, () => ({ proc: null, started: 0 }));
  const start = (slot: number) => {
    slots[slot]!.proc = startWorker(`w${slot}.${slots[slot]!.started++}`);
  };
  const startWorker = (name: string): Proc => {
    const actor = new Actor(name);
    const clock = sched.clockOf(actor);
    const consumer = new SimConsumer(kafka, actor);
    // One transactional.id a slot, as a StatefulSet names its pods: a restart fences its predecessor.
    const txn = () => new SimTransactions(kafka, actor, `sim-${name.split(".")[0]}`, () => clock.now(), TXN_TIMEOUT_MS);
    const transactions = new TransactionalCommits(txn(), {
      group: () => consumer.groupMetadata(),
      owns: (partition) => consumer.assignment.some((a) => a.partition === partition),
      topic: RAW,
      timeoutMs: TXN_TIMEOUT_MS,
      renew: txn,
      now: () => clock.mono(),
      sleep: (ms) => clock.sleep(ms),
      committed: (ps) => kafka.request(actor, () => kafka.committedOf(ps.map((partition) => ({ topic: RAW, partition })))),
    });
    const counters = new Counters();
    const clients = Array.from({ length: s.endpoints }, (_, i) => ({
      name: `ch${i}:8123`,
      client: ch.client(actor, i, REQUEST_TIMEOUT_MS) as unknown as ClickHouseClient,
    }));
    const writer = new ClickHouseWriter(clients, "telecom", "cdr", {
      instance: name,
      user: "default",
      syncDistributed: true,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      clock,
    });
    const dlq = new DlqPublisher(transactions, {
      topic: DLQ,
      workerInstance: name,
      storageFailureReason: "normalization_error",
    });
    const replays = {
      findDelivered: (partitions: number[], commitMarks: CommitMarks) =>
        findDelivered(partitions, {
          topic: RAW,
          committed: (tps) => kafka.request(actor, () => kafka.committedOf(tps)),
          commit: commitMarks,
          lowWatermarks: async (ps) => new Map(ps.map((p) => [p, 0])),
          highWatermarks: (ps) => simLookup(kafka, actor).listOffsets(RAW, ps, "latest"),
          insertsEnded: () => writer.insertsEnded(),
          stored: (owned) => writer.storedOffsets(owned),
          deadLettered: (owned) =>
            deadLetteredOffsets(new SimDlqReader(kafka), simLookup(kafka, actor), DLQ, 1, RAW, owned),
          now: () => clock.now(),
        }),
    };
    const delivery = new Delivery(
      {
        topic: RAW,
        batchSize: BATCH_SIZE,
        batchBacklogRows: BACKLOG_ROWS,
        flushIntervalMs: 2_000,
        concurrency: CONCURRENCY,
        retry: { maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2, whenUnreachable: s.policy },
        dlqMaxRatio: 1,
        dlqRatioWindow: 1_000,
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        maxPollIntervalMs: MAX_POLL_INTERVAL_MS,
      },
      { consumer, writer, dlq, counters, replays, transactions, clock },
    );
    const worker = new Worker({ consumer, decoding: { phone }, delivery });
    const proc: Proc = { actor, worker, consumer, delivery, ended: false, restartMs: 1_000 };
    // The process's first step runs as that process.
    sched.at(0, () => {
      // A supervisor starts a new process in the slot once this one exits, however it exits.
      const exited = (restartMs: number) => {
        proc.ended = true;
        if (actor.dead) return;
        sched.kill(actor);
        const slot = slots.findIndex((x) => x.proc === proc);
        if (slot >= 0) sched.at(restartMs, () => start(slot));
      };
      transactions.init().then(() => worker.run()).then(
        () => exited(proc.restartMs),
        () => exited(1_000),
      );
    }, actor);
    return proc;
  };
  for (let i = 0; i < s.workers; i++) start(i);

  // The memory bound's terms (docs/internals.md "Memory, in bytes"): rows held are at most the
  // filling batch and FLUSH_CONCURRENCY sealed ones, each of at most BATCH_BACKLOG_ROWS, whatever
  // the faults; sampled every 100 ms of virtual time.
  const rowBound = (CONCURRENCY + 1) * BACKLOG_ROWS;
  let boundBroken = false;
  const sample = () => {
    for (const slot of slots) {
      const held = slot.proc && !slot.proc.actor.dead ? slot.proc.delivery.bufferedRows : 0;
      if (held > rowBound && !boundBroken) {
        boundBroken = true;
        violations.push({
          signature: "memory-bound/rows-held",
          detail: `${slot.proc!.actor.name} held ${held} rows at ${sched.now} ms, over (FLUSH_CONCURRENCY + 1) × BATCH_BACKLOG_ROWS = ${rowBound}`,
        });
      }
    }
    sched.at(100, sample);
  };
  sched.at(100, sample);
  for (const f of s.faults) sched.at(f.at, () => apply(f));
  function apply(f: Fault): void {
    const proc = "worker" in f ? slots[f.worker]!.proc : null;
    const endpoint = "endpoint" in f ? ch.faults[f.endpoint]! : null;
    const until = sched.now + ("ms" in f ? Math.abs(f.ms) : 0);
    if ("endpoint" in f && f.kind !== "ch-cut") troubles.push({ endpoint: f.endpoint, from: sched.now });
    switch (f.kind) {
      case "crash":
        if (!proc || proc.actor.dead) return;
        sched.kill(proc.actor);
        kafka.heal(proc.actor);
        sched.at(f.restartMs, () => start(f.worker));
        return;
      case "restart":
        // SIGTERM: the process drains and exits; the supervisor starts the next one restartMs later.
        if (!proc || proc.actor.dead || proc.actor.frozen) return;
        proc.restartMs = f.restartMs;
        proc.worker.stop();
        return;
      case "freeze": {
        if (!proc) return;
        const a = proc.actor;
        const freeze = () => {
          sched.freeze(a);
          sched.at(f.ms, () => sched.thaw(a));
        };
        if (!f.atAnswer) return freeze();
        let left = f.atAnswer;
        a.onAnswer = () => {
          if (--left > 0) return false;
          a.onAnswer = null;
          freeze();
          return true;
        };
        return;
      }
      case "kafka-cut":
        if (!proc) return;
        kafka.cut(proc.actor);
        sched.at(f.ms, () => kafka.heal(proc.actor));
        return;
      case "ch-cut":
        if (!proc) return;
        ch.cut(proc.actor, f.endpoint, f.ms);
        troubles.push({ endpoint: f.endpoint, actor: proc.actor.name, from: sched.now });
        return;
      case "clock-step":
        if (proc) proc.actor.wallStep += f.ms;
        return;
      case "txn-answers-lost":
        if (proc) kafka.txnAnswersLost.set(proc.actor.name, { until, request: f.request });
        return;
      case "slow-answers":
        if (proc) kafka.slowAnswers.set(proc.actor.name, { until, extraMs: f.extraMs });
        return;
      case "broker-restart":
        kafka.restart(f.ms);
        return;
      case "lost-answers":
        endpoint!.lostAnswersUntil = until;
        return;
      case "endpoint-down":
        endpoint!.downUntil = until;
        return;
      case "refuse":
        endpoint!.refuseUntil = until;
        return;
      case "slow":
        endpoint!.slowUntil = until;
        return;
      case "view-fails":
        endpoint!.viewFailsUntil = until;
        return;
    }
  }

  const ownerProc = (p: number) => slots.find((x) => x.proc?.actor.name === kafka.ownerOf(p))?.proc ?? null;
  const quietAt = Math.max(faultsEnd(s), s.produceMs);
  const deadline = quietAt + SETTLE_MS;
  const delivered = () => {
    if (sched.now < quietAt) return false;
    for (let p = 0; p < PARTITIONS; p++) if ((kafka.committed.get(p)?.offset ?? 0) < kafka.raw[p]!.length) return false;
    return true;
  };
  try {
    await runTracking(sched, deadline, delivered, (a) => (current = a));
    const caughtUp = delivered();
    await runTracking(sched, sched.now + AFTERMATH_MS, () => false, (a) => (current = a));
    // Every process running at the end is back in the group: one removed or fenced declares the
    // loss and rejoins, and never waits without end (a member fenced mid-revocation once did).
    for (const slot of slots) {
      const proc = slot.proc;
      if (!proc || proc.actor.dead || proc.actor.frozen || proc.ended || proc.consumer.isMember) continue;
      violations.push({
        signature: "wedged/not-a-member",
        detail: `${proc.actor.name} runs outside the group ${((AFTERMATH_MS + SETTLE_MS) / 1000).toFixed(0)} s or more after the faults ended`,
      });
    }
    // The lease reads a gap between two looks at the clocks as a freeze and holds every send for
    // its verdict. With no process frozen and no clock stepped, a gap is a loop that waited without
    // looking (a revocation settling, a drain): a stall with no cause.
    if (!s.faults.some((f) => f.kind === "freeze" || f.kind === "clock-step"))
      for (const line of lines.filter((l) => l.includes("did not run for longer than half its session")))
        violations.push({ signature: "false-freeze/unwatched-clocks", detail: line.slice(0, 200) });
    for (let p = 0; p < PARTITIONS; p++) {
      const committed = kafka.committed.get(p)?.offset ?? 0, length = kafka.raw[p]!.length;
      if (!caughtUp && committed < length)
        violations.push({
          signature: `stuck/${stuckCause(lines, quietAt, ch, ownerProc(p))}`,
          partition: p,
          offset: committed,
          detail: `partition ${p} committed ${committed} of ${length} ${(SETTLE_MS / 1000).toFixed(0)} s after the faults ended`,
        });
    }
  } finally {
    // Every process ends with the run; nothing it left pending may run into the next one.
    for (const slot of slots) if (slot.proc) sched.kill(slot.proc.actor);
    setLogSink();
    process.off("unhandledRejection", onRejection);
  }
  for (const e of rejections)
    violations.push({ signature: "unhandled-rejection", detail: e instanceof Error ? (e.stack ?? e.message) : String(e) });

  const outcome = outcomes(kafka, ch, unread, troubles, (v) => decode(v, { phone }).ok);
  violations.push(...outcome.violations);
  return {
    schedule: s,
    violations,
    exhaustedUnknown: outcome.exhaustedUnknown,
    records: s.records,
    stored: ch.rows.length,
    envelopes: kafka.dlq.length,
    virtualMs: sched.now,
    events: sched.fired,
    log: lines,
  };
}

/** The scheduler's loop, with the actor of each event made known before it runs. */
async function runTracking(sched: Scheduler, until: number, done: () => boolean, onActor: (a: Actor | null) => void) {
  sched.onFire = onActor;
  await sched.run(until, done);
}

/**
 * Rows a process logged it could not read before the spec's exhausted path dead-lettered them,
 * perhaps stored: `offsets` as the line names them, `partition:first-last`.
 */
export interface UnreadRows {
  actor: string;
  at: number;
  offsets: readonly string[];
}

/** An endpoint's fault from `from` on: for every worker, or for `actor` alone (a cut). */
interface Trouble {
  endpoint: number;
  actor?: string;
  from: number;
}

/**
 * Each offset's fate: stored once or dead-lettered once, never both, never twice; and a valid
 * record never dead-lettered for storage while an endpoint its sender could reach had no fault at all.
 */
function outcomes(
  kafka: SimKafka,
  ch: SimClickHouse,
  unread: readonly UnreadRows[],
  troubles: readonly Trouble[],
  valid: (value: Uint8Array) => boolean,
) {
  const violations: Violation[] = [];
  let exhaustedUnknown = 0;
  const rows = new Map<string, typeof ch.rows>();
  for (const r of ch.rows) {
    const k = `${r.partition}:${r.offset}`;
    rows.set(k, [...(rows.get(k) ?? []), r]);
  }
  const envelopes = new Map<string, typeof kafka.dlq>();
  for (const e of kafka.dlq) {
    const src = envelopeSource(e.headers);
    if (!src) continue;
    const k = `${src.partition}:${src.offset}`;
    envelopes.set(k, [...(envelopes.get(k) ?? []), e]);
  }
  const stageOf = (e: (typeof kafka.dlq)[number]) =>
    new TextDecoder().decode(e.headers.find(([k]) => k === "dlq.error.stage")?.[1] ?? new Uint8Array());
  for (let p = 0; p < kafka.raw.length; p++) {
    for (let o = 0; o < kafka.raw[p]!.length; o++) {
      const k = `${p}:${o}`;
      const stored = rows.get(k) ?? [], dead = envelopes.get(k) ?? [];
      if (stored.length > 1) {
        const cause = againCause(stored, ch, kafka);
        violations.push({
          signature: `stored-twice/${cause}`,
          partition: p,
          offset: o,
          detail: stored.map((r) => `${r.queryId} at endpoint ${r.endpoint}`).join("; "),
        });
      }
      if (dead.length > 1) {
        const byProducer = new Set(dead.map((e) => e.producer));
        // A replay check (its offsets read stands for its DLQ read) by the later sender, after the
        // first envelope was in the DLQ and before the second went: the check's read left it out.
        const [first, again] = [...dead].sort((x, y) => x.sentAt - y.sentAt);
        const missed = (ch.offsetReads.get(again!.producer) ?? []).some((t) => t > first!.appendedAt && t < again!.sentAt);
        const cause = dead.some(held)
          ? "held-envelope"
          : dead.some((e) => e.zombie)
            ? "zombie-dead-letter"
            : missed
              ? "replayed-missed-envelope"
              : byProducer.size > 1
                ? "two-owners"
                : "one-owner";
        violations.push({
          signature: `dead-lettered-twice/${cause}`,
          partition: p,
          offset: o,
          detail: dead.map((e) => `${e.producer} (${stageOf(e)}, sent ${e.sentAt} ms, shown ${e.appendedAt} ms)`).join("; "),
        });
      }
      // Stored or not (a lost answer's rows), a valid record is dead-lettered for storage only when
      // every endpoint its sender could reach had been in trouble: one never troubled could take it.
      const failed = dead.filter((e) => stageOf(e) === "clickhouse-failed");
      const untroubled = (e: (typeof failed)[number], endpoint: number) =>
        !troubles.some((t) => t.endpoint === endpoint && (!t.actor || t.actor === e.producer) && t.from < e.sentAt);
      const spare =
        failed.length > 0 && valid(kafka.raw[p]![o]!.value) ? failed.find((e) => ch.faults.some((_, i) => untroubled(e, i))) : undefined;
      if (spare) {
        violations.push({
          signature: "valid-dead-lettered/endpoint-answered",
          partition: p,
          offset: o,
          detail: `${spare.producer} sent it at ${spare.sentAt} ms; endpoints ${ch.faults.map((_, i) => i).filter((i) => untroubled(spare, i)).join(", ")} had no fault`,
        });
        continue;
      }
      if (stored.length > 0 && dead.length > 0) {
        const writers = new Set(stored.map((r) => workerOf(r.queryId)));
        const sameWorker = dead.every((e) => writers.has(e.producer));
        if (dead.every((e) => stageOf(e) === "clickhouse-failed" && unreadable(e, stored, { partition: p, offset: o }, unread, ch.viewRows))) {
          exhaustedUnknown++;
          continue;
        }
        const firstRow = Math.min(...stored.map((r) => r.storedAt));
        const firstDead = Math.min(...dead.map((e) => e.sentAt));
        const lastDead = Math.max(...dead.map((e) => e.appendedAt));
        const storer = workerOf(stored[0]!.queryId);
        const missedEnvelope = (ch.offsetReads.get(storer) ?? []).some((t) => t > lastDead && t < firstRow);
        const cause = dead.some(held)
          ? "held-envelope"
          : dead.some((e) => e.zombie)
            ? "zombie-dead-letter"
            : stored.some((r) => r.zombie)
              ? zombieCause(stored, kafka)
              : missedEnvelope
                ? "replayed-missed-envelope"
                : missedByCheck(stored[0]!, dead[0]!.producer, stored[0]!.storedAt, firstDead, ch)
                  ? "check-missed-row"
                  : sameWorker
                    ? "one-owner"
                    : "two-owners";
        violations.push({
          signature: `stored-and-dead-lettered/${cause}`,
          partition: p,
          offset: o,
          detail: `rows ${stored.map((r) => r.queryId).join(", ")}; envelopes ${dead.map((e) => `${e.producer} (${stageOf(e)})`).join(", ")}`,
        });
      }
    }
  }
  return { violations, exhaustedUnknown };
}

/**
 * The spec's exhausted path with no endpoint able to say what is stored: the envelope's sender logged,
 * before it sent it, that it could not read the rows covering this offset, and each row stored is
 * one it could not have known of otherwise: its own insert's, whose answer was lost, or one a
 * partition's last owner stored before that read and the offsets table lacks (so the replay check
 * could not find it, and the row was unsure). A row the offsets table shows, or one stored after the
 * read or by a zombie, is another cause. Every endpoint was in trouble for the sender by then, or
 * `valid-dead-lettered/endpoint-answered` has already named the envelope.
 */
export function unreadable(
  e: Pick<DlqRecord, "producer" | "sentAt">,
  stored: readonly StoredRow[],
  at: { partition: number; offset: number },
  unread: readonly UnreadRows[],
  viewRows: readonly StoredRow[],
): boolean {
  const { partition: p, offset: o } = at;
  const viewed = (r: StoredRow) => viewRows.some((v) => v.queryId === r.queryId && v.partition === r.partition && v.offset === r.offset);
  const before = (u: UnreadRows) => (r: StoredRow) => workerOf(r.queryId) === e.producer || (!r.zombie && r.storedAt <= u.at && !viewed(r));
  return unread.some(
    (u) => u.actor === e.producer && u.at <= e.sentAt && u.offsets.some((r) => covers(r, p, o)) && stored.every(before(u)),
  );
}

/** Whether a logged range `partition:first-last` holds offset `o` of partition `p`. */
function covers(range: string, p: number, o: number): boolean {
  const m = /^(\d+):(\d+)-(\d+)$/.exec(range);
  return m !== null && Number(m[1]) === p && o >= Number(m[2]) && o <= Number(m[3]);
}

/** Two heartbeat intervals: a commit accepted later than this after a member's last heartbeat came without them. */
const HEARTBEAT_GAP_MS = 2 * HEARTBEAT_INTERVAL_MS;

/**
 * A zombie insert's cause: `lease-without-heartbeats` when its sender's membership lease was renewed
 * by a transactional commit the coordinator accepted well after the last heartbeat it had from that
 * member, and the member was then removed for silence (the producer's connection got through while
 * the consumer's heartbeats did not, and a TxnOffsetCommit keeps no session); `sent-after-removal`
 * when the group had removed its sender for silence before the row was stored (a member frozen, then
 * cut from the brokers through the freeze's verdict window, that sends its old rows once it is back);
 * else `zombie-insert`.
 */
function zombieCause(stored: StoredRow[], kafka: SimKafka): string {
  for (const r of stored.filter((x) => x.zombie)) {
    const who = workerOf(r.queryId);
    const removed = kafka.expiredSilent.find((e) => e.member.startsWith(`${who}#`) && e.at <= r.storedAt);
    const unproven = (c: { member: string; at: number; lastHeartbeat: number }) =>
      c.member === removed?.member && c.at > c.lastHeartbeat + HEARTBEAT_GAP_MS && c.at < removed.at;
    if (removed && kafka.txnOffsetsAccepted.some(unproven)) return "lease-without-heartbeats";
    if (removed) return "sent-after-removal";
  }
  return "zombie-insert";
}

/** An envelope a cut between its producer and the brokers held back, to be appended after it healed. */
function held(e: DlqRecord): boolean {
  return e.appendedAt - e.sentAt > 1_000;
}

/**
 * Why a row was stored again: a replay check read the offsets table between the two stores and
 * left it out (the view lacks it, or its time window did), a lost-answer check read the table and
 * missed it, or the rows were sent again with no read at all (an unchecked resend, to the same
 * endpoint or the next).
 */
function againCause(stored: StoredRow[], ch: SimClickHouse, kafka: SimKafka): string {
  const first = stored[0]!, again = stored[1]!;
  if (stored.some((r) => r.zombie)) return zombieCause(stored, kafka);
  const who = workerOf(again.queryId);
  const checkedAt = ch.offsetReads.get(who) ?? [];
  const replayed = checkedAt.some((t) => t > first.storedAt && t < again.storedAt);
  const viewed = ch.viewRows.some((r) => r.partition === first.partition && r.offset === first.offset && r.queryId === first.queryId);
  if (replayed) return viewed ? "replayed-outside-window" : "replayed-view-lacks-row";
  if (workerOf(first.queryId) !== who) return "replayed-after-check";
  return missedByCheck(first, who, first.storedAt, again.storedAt, ch) ? "check-missed-row" : "unchecked-resend";
}

/** A lost-answer read by `who` between `from` and `to` covered the row and did not find it. */
function missedByCheck(row: StoredRow, who: string, from: number, to: number, ch: SimClickHouse): boolean {
  const key = `${row.partition}:${row.offset}`;
  return ch.rowReads.some(
    (r) =>
      r.actor === who &&
      r.at > from &&
      r.at < to &&
      r.partitions.has(row.partition) &&
      row.offset >= r.min &&
      row.offset <= r.max &&
      !r.found.has(key),
  );
}

function workerOf(queryId: string): string {
  return queryId.split(":")[1] ?? "?";
}

/** What the processes were retrying once the faults were over, from their log. */
function stuckCause(lines: readonly string[], quietAt: number, ch: SimClickHouse, owner: Proc | null): string {
  if (ch.lastLongScan > quietAt) return "lost-answer-read";
  // Rows held in memory, nothing waiting on ClickHouse: the batch is not being flushed.
  if (owner && owner.delivery.bufferedRows > 0 && owner.delivery.positions().size > 0) return "batch-held";
  const after = lines.filter((l) => Number(l.slice(0, l.indexOf(" "))) * 1000 > quietAt);
  if (after.some((l) => l.includes("reading what an insert whose answer was lost stored"))) return "lost-answer-read";
  if (after.some((l) => l.includes("replay check failed"))) return "replay-check";
  return "unknown";
}

/** Which offsets are durable (a row stored, or an envelope in the DLQ), read as the commits arrive. */
class Durability {
  readonly #done = new Set<string>();
  #rows = 0;
  #dlq = 0;
  constructor(
    readonly kafka: SimKafka,
    readonly ch: SimClickHouse,
  ) {}

  /** The first offset below `offset` of `partition` that is neither stored nor dead-lettered, or null. */
  firstUndurable(partition: number, offset: number): number | null {
    for (; this.#rows < this.ch.rows.length; this.#rows++) {
      const r = this.ch.rows[this.#rows]!;
      this.#done.add(`${r.partition}:${r.offset}`);
    }
    // An envelope is durable once its transaction's commit is decided, before its marker shows it.
    for (; this.#dlq < this.kafka.dlqDecided.length; this.#dlq++) {
      const src = envelopeSource(this.kafka.dlqDecided[this.#dlq]!.headers);
      if (src) this.#done.add(`${src.partition}:${src.offset}`);
    }
    for (let o = 0; o < offset; o++) if (!this.#done.has(`${partition}:${o}`)) return o;
    return null;
  }
}

/** The same record with epoch_start 0: valid, and its session starts in 1970. */
function epochZero(text: string): string {
  try {
    const r = JSON.parse(text) as Record<string, unknown>;
    if (typeof r.epoch_start !== "number") return text;
    return JSON.stringify({ ...r, epoch_start: 0 });
  } catch {
    return text;
  }
}
