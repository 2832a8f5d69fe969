/**
 * Simulated Kafka for the delivery simulation: the raw topic's partitions, the DLQ topic, and one
 * consumer group with an eager protocol, as the worker meets them through its TypeScript
 * interfaces (GroupConsumer, RecordProducer, RangeReader, OffsetLookup).
 *
 * What it keeps of the real broker and of librdkafka, because the invariants depend on it:
 * - a member's session is measured from the last heartbeat the coordinator received; one silent past
 *   session.timeout.ms is removed and its partitions are given to the others;
 * - librdkafka declares the assignment lost on its own when no heartbeat succeeded for a session,
 *   and when a heartbeat is answered UNKNOWN_MEMBER_ID;
 * - librdkafka's statistics every 0.23 s, with the facts of scripts/librdkafka/patches/heartbeat-facts.patch:
 *   when the heartbeat the coordinator last accepted was sent, when the last refused or lost one was
 *   (a heartbeat unanswered for a session times out), and since when the member is in a rebalance;
 *   the member reads its standing from them with the worker's own kafka/heartbeat-proof.ts, in its
 *   polls only (librdkafka serves the statistics callback there);
 * - a commit carries the member id and generation it was sent with: an unknown member is refused
 *   UNKNOWN_MEMBER_ID, an old generation ILLEGAL_GENERATION; a rebalance that is preparing still
 *   takes commits of the current generation (the revoking member commits then);
 * - a client cut off from the brokers keeps its requests (librdkafka retries them) and sends them
 *   when the cut heals, produce requests included: an idempotent producer delivers each once, late;
 * - records fetched before a cut are still handed out (librdkafka's prefetch queue); a pause drops
 *   what was fetched of that partition and fetching resumes after the last record handed out;
 * - transactions (KIP-98, KIP-447): a transactional.id's init bumps its epoch, aborting what an
 *   earlier holder left open and fencing it; records and offsets sent in a transaction show only
 *   when it commits, together; offsets are refused for a member or generation the group has left
 *   (abortable); a transaction open past transaction.timeout.ms is aborted by the coordinator, which
 *   fences its producer; a read of committed offsets is refused as unstable while a transaction
 *   holds offsets of that partition (require_stable).
 * test/sim/fidelity.test.ts holds these to the real broker.
 */
import { HEARTBEAT_INTERVAL_MS, STATISTICS_INTERVAL_MS } from "../../src/cli/kafka-clients.ts";
import { envelopeSource } from "../../src/dlq/envelope.ts";
import { KafkaError } from "../../src/errors.ts";
import type { Message } from "../../src/kafka/message.ts";
import { standingOf, type Standing } from "../../src/kafka/heartbeat-proof.ts";
import type { TopicPartition } from "../../src/kafka/partition-list.ts";
import { TransactionError } from "../../src/kafka/transaction.ts";
import type { Actor, Scheduler } from "./scheduler.ts";

export const RAW = "cdr.raw";
export const DLQ = "cdr.raw.dlq";

/** librdkafka's error codes the worker tells apart (rdkafka.h). */
const CODES = {
  UNKNOWN_MEMBER_ID: 25,
  UNSTABLE_OFFSET_COMMIT: 88,
  ILLEGAL_GENERATION: 22,
  REBALANCE_IN_PROGRESS: 27,
  COORDINATOR_LOAD_IN_PROGRESS: 14,
  // librdkafka's local errors carry a leading underscore in their names, as the worker sees them.
  _MSG_TIMED_OUT: -192,
} as const;
type Code = keyof typeof CODES;

/** Codes a later attempt can get past (handle.ts's TRANSIENT). */
const RETRYABLE: ReadonlySet<Code> = new Set(["COORDINATOR_LOAD_IN_PROGRESS", "UNSTABLE_OFFSET_COMMIT"]);

export function kafkaRefusal(what: string, code: Code): KafkaError {
  return new KafkaError("KAFKA_COMMIT", `${what}: ${code}`, CODES[code], code, RETRYABLE.has(code));
}

export interface DlqRecord {
  value: Uint8Array;
  headers: Array<[string, Uint8Array]>;
  /** The producer's clock (CreateTime). */
  timestamp: number;
  producer: string;
  /** Virtual times the producer sent it and the broker appended it (later when a cut held it). */
  sentAt: number;
  appendedAt: number;
  /** Sent by a process the group no longer counted as the owner of its source partition. */
  zombie: boolean;
}

export interface KafkaOptions {
  partitions: number;
  sessionTimeoutMs: number;
  maxPollIntervalMs: number;
  /** Records a member fetches ahead per partition (librdkafka's prefetch queue). */
  prefetch: number;
  /** How long a produce request may wait for the brokers before it fails (message.timeout.ms). */
  messageTimeoutMs: number;
  /**
   * The classic protocol's assignors: eager (every member gives up everything and rejoins, the
   * default) or cooperative-sticky (members keep what stays theirs; a partition that moves is first
   * revoked by its owner, which then rejoins, and assigned in the rebalance that follows); or
   * KIP-848's consumer protocol (no rebalance barrier: the coordinator sends each member its target
   * at once; a partition that moves is assigned once its owner acknowledged the revocation, and a
   * member that has not within the rebalance timeout, max.poll.interval.ms, is fenced).
   */
  protocol?: "eager" | "cooperative" | "consumer";
}

interface Member {
  id: string;
  client: SimConsumer;
  lastHeartbeat: number;
  /** Rejoined the rebalance under way (or the first one). */
  joined: boolean;
  assignment: number[];
  /** KIP-848: since when it owes a revocation it was sent (null: none). */
  owesSince?: number | null;
  /** Incremental protocols: partitions it was told to give up and has not yet (assigned to nobody meanwhile). */
  revoking?: number[];
}

interface SimTxn {
  epoch: number;
  open: boolean;
  openedAt: number;
  timeoutMs: number;
  records: DlqRecord[];
  offsets: TopicPartition[];
  /** Resolves once every marker of the transaction that ended last is written. */
  markers: Promise<void>;
}

/** statistics.interval.ms and heartbeat.interval.ms: the worker's under exactly-once (cli/kafka-clients.ts). */
const STATISTICS_MS = STATISTICS_INTERVAL_MS;
const HEARTBEAT_MS = HEARTBEAT_INTERVAL_MS;

const TXN_CODES: Record<string, number> = { ...CODES, _FENCED: -144 };

/** A transactional call's failure with librdkafka's verdict (kafka/transaction.ts). */
function txnRefusal(what: string, code: string, verdict: "retry" | "abort" | "fatal"): TransactionError {
  return new TransactionError(
    `${what}: ${code}`,
    TXN_CODES[code] ?? -1,
    code,
    verdict === "retry",
    verdict === "abort",
    verdict === "fatal",
  );
}

/** A commit the coordinator took: what the invariants check against what is durable. */
export interface CommitSeen {
  partition: number;
  offset: number;
  member: string;
  at: number;
}

export class SimKafka {
  readonly raw: Array<Array<{ value: Uint8Array; timestamp: number }>>;
  readonly dlq: DlqRecord[] = [];
  /** Envelopes of transactions the coordinator decided to commit, markers written or not: durable. */
  readonly dlqDecided: DlqRecord[] = [];
  readonly committed = new Map<number, { offset: number; metadata: string }>();
  readonly #members = new Map<string, Member>();
  #generation = 0;
  #rebalancing = false;
  #rebalanceStarted = 0;
  #nextMember = 0;
  /** KIP-848: members fenced for a revocation not acknowledged in time; their heartbeats hear so. */
  readonly #fenced = new Set<string>();
  /** Group offsets of transactions decided whose marker is not written yet, by partition. */
  readonly #unstable = new Map<number, number>();
  readonly #cut = new Set<Actor>();
  #downUntil = 0;
  #loadingUntil = 0;
  readonly #held: Array<{ actor: Actor; go: () => void }> = [];
  /** Each transactional.id's epoch and open transaction, as its coordinator keeps them. */
  readonly #txns = new Map<string, SimTxn>();
  /** Hears each commit the coordinator takes, before it is stored. */
  onCommit: (c: CommitSeen) => void = () => {};
  /**
   * Per process (actor name), until when the coordinator's answers to its transactional requests
   * are lost after the request took effect: EndTxn and TxnOffsetCommit written, the answer never back.
   */
  readonly txnAnswersLost = new Map<string, { until: number; request: "EndTxn" | "TxnOffsetCommit" }>();
  /** Answers to a worker's requests that come late (a far broker, a quota), until when and by how much. */
  readonly slowAnswers = new Map<string, { until: number; extraMs: number }>();
  /** Each TxnOffsetCommit accepted, with the last heartbeat the coordinator had from that member then. */
  readonly txnOffsetsAccepted: Array<{ member: string; at: number; lastHeartbeat: number }> = [];
  /** Members removed for silence (no heartbeat for a session), and when. */
  readonly expiredSilent: Array<{ member: string; at: number; lastHeartbeat: number }> = [];

  constructor(
    readonly sched: Scheduler,
    readonly opts: KafkaOptions,
  ) {
    this.raw = Array.from({ length: opts.partitions }, () => []);
    const tick = () => {
      this.#expire();
      this.#expireTransactions();
      sched.at(250, tick);
    };
    sched.at(250, tick);
  }

  get generation(): number {
    return this.#generation;
  }

  hasMember(id: string): boolean {
    return this.#members.has(id);
  }

  /** The process that owns `partition` as the coordinator sees it now (its member is in the group), or null. */
  ownerOf(partition: number): string | null {
    for (const m of this.#members.values()) if (m.assignment.includes(partition)) return m.client.actor.name;
    return null;
  }

  /** Partitions each live member owns now, for the report. */
  owners(): Map<string, number[]> {
    return new Map([...this.#members].map(([id, m]) => [id, m.assignment]));
  }

  append(partition: number, value: Uint8Array, timestamp: number): void {
    this.raw[partition]!.push({ value, timestamp });
  }

  reachable(a: Actor): boolean {
    return !this.#cut.has(a) && this.sched.now >= this.#downUntil;
  }

  /** Packets between `a` and the brokers are dropped until heal(). */
  cut(a: Actor): void {
    this.#cut.add(a);
  }

  heal(a: Actor): void {
    this.#cut.delete(a);
    this.#release();
  }

  /** The brokers stop for `ms`; then the coordinator loads its groups for a while. */
  restart(ms: number): void {
    this.#downUntil = this.sched.now + ms;
    this.#loadingUntil = this.#downUntil + 1_000;
    this.sched.at(ms, () => this.#release());
  }

  /**
   * A request from `a`: handled at the broker after a network delay once the path is open, its
   * answer back at `a` once the path is open again. Held requests and answers go on a heal.
   */
  request<T>(a: Actor, handle: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const send = () => {
        if (a.dead) return;
        if (!this.reachable(a)) return void this.#held.push({ actor: a, go: send });
        this.sched.at(this.#latency(), () => {
          let ok = true, value: T | undefined, error: unknown;
          try {
            value = handle();
          } catch (e) {
            ok = false;
            error = e;
          }
          const answer = () => {
            if (!this.reachable(a)) return void this.#held.push({ actor: a, go: answer });
            const slow = this.slowAnswers.get(a.name);
            const extra = slow && this.sched.now < slow.until ? slow.extraMs : 0;
            this.sched.at(this.#latency() + extra, () => (ok ? resolve(value as T) : reject(error)), a);
          };
          answer();
        });
      };
      send();
    });
  }

  /** A member joins (or rejoins after giving up its partitions): a rebalance starts. */
  join(client: SimConsumer): string {
    const id = `${client.actor.name}#${this.#nextMember++}`;
    this.#members.set(id, { id, client, lastHeartbeat: this.sched.now, joined: true, assignment: [] });
    this.#startRebalance();
    return id;
  }

  /** A member that gave up what it held asks back in. */
  rejoin(id: string): boolean {
    const m = this.#members.get(id);
    if (!m) return false;
    m.joined = true;
    m.lastHeartbeat = this.sched.now;
    this.#maybeComplete();
    return true;
  }

  leave(id: string): void {
    if (this.#members.delete(id)) this.#startRebalance();
  }

  /** A heartbeat: "ok", "rebalance" (give up and rejoin) or "unknown" (the session ended). */
  heartbeat(id: string): "ok" | "rebalance" | "unknown" | "fenced" {
    const m = this.#members.get(id);
    if (!m) return this.#fenced.has(id) ? "fenced" : "unknown";
    m.lastHeartbeat = this.sched.now;
    return this.#rebalancing && !m.joined ? "rebalance" : "ok";
  }

  commit(id: string | null, generation: number, offsets: readonly TopicPartition[]): TopicPartition[] {
    if (this.sched.now < this.#loadingUntil) throw kafkaRefusal("commit", "COORDINATOR_LOAD_IN_PROGRESS");
    const m = id === null ? undefined : this.#members.get(id);
    // The replay check's first commit comes from a member; a commit without one is a tool's.
    if (id !== null && !m) throw kafkaRefusal("commit", "UNKNOWN_MEMBER_ID");
    if (m && generation !== this.#generation) throw kafkaRefusal("commit", "ILLEGAL_GENERATION");
    if (m && this.#rebalancing && m.joined) throw kafkaRefusal("commit", "REBALANCE_IN_PROGRESS");
    for (const o of offsets) {
      const offset = Number(o.offset);
      this.onCommit({ partition: o.partition, offset, member: id ?? "-", at: this.sched.now });
      this.committed.set(o.partition, { offset, metadata: o.metadata ?? "" });
    }
    return offsets.map((o) => ({ ...o }));
  }

  committedOf(partitions: readonly TopicPartition[]): TopicPartition[] {
    for (const t of this.#txns.values())
      if (t.open && t.offsets.some((o) => partitions.some((p) => p.partition === o.partition)))
        throw kafkaRefusal("committed", "UNSTABLE_OFFSET_COMMIT");
    // A transaction decided whose marker on the group's offsets is not yet written: still pending.
    if (partitions.some((p) => (this.#unstable.get(p.partition) ?? 0) > 0)) throw kafkaRefusal("committed", "UNSTABLE_OFFSET_COMMIT");
    return partitions.map((tp) => {
      const c = this.committed.get(tp.partition);
      return c
        ? { topic: tp.topic, partition: tp.partition, offset: BigInt(c.offset), metadata: c.metadata }
        : { topic: tp.topic, partition: tp.partition, offset: -1001n };
    });
  }

  /** InitProducerId: a new epoch for `id`; what an earlier holder left open is aborted. */
  initTransactions(id: string, timeoutMs: number): number {
    if (this.sched.now < this.#loadingUntil) throw txnRefusal("init", "COORDINATOR_LOAD_IN_PROGRESS", "retry");
    const t = this.#txns.get(id);
    const epoch = (t?.epoch ?? -1) + 1;
    this.#txns.set(id, { epoch, open: false, openedAt: 0, timeoutMs, records: [], offsets: [], markers: Promise.resolve() });
    return epoch;
  }

  /** A record produced in `id`'s open transaction: kept, not shown, until it commits. */
  txnProduce(id: string, epoch: number, record: DlqRecord): void {
    const t = this.#current(id, epoch, "produce");
    if (!t.open) {
      t.open = true;
      t.openedAt = this.sched.now;
    }
    t.records.push(record);
  }

  /** TxnOffsetCommit: the group's checks of a commit, then the offsets wait for the transaction's end. */
  txnOffsets(id: string, epoch: number, member: string, generation: number, offsets: readonly TopicPartition[]): void {
    const t = this.#current(id, epoch, "send offsets");
    if (this.sched.now < this.#loadingUntil) throw txnRefusal("send offsets", "COORDINATOR_LOAD_IN_PROGRESS", "retry");
    const m = this.#members.get(member);
    if (!m) throw txnRefusal("send offsets", "UNKNOWN_MEMBER_ID", "abort");
    if (generation !== this.#generation) throw txnRefusal("send offsets", "ILLEGAL_GENERATION", "abort");
    // A TxnOffsetCommit does not keep the session (the producer sends it, not the member's heartbeats).
    this.txnOffsetsAccepted.push({ member, at: this.sched.now, lastHeartbeat: m.lastHeartbeat });
    if (!t.open) {
      t.open = true;
      t.openedAt = this.sched.now;
    }
    for (const o of offsets) {
      const i = t.offsets.findIndex((x) => x.partition === o.partition);
      if (i >= 0) t.offsets.splice(i, 1);
      t.offsets.push({ ...o });
    }
  }

  /**
   * EndTxn: answered once the coordinator decided; then it writes the markers partition by partition
   * (WriteTxnMarkers), the DLQ's and the group offsets' each at its own time, in either order. Until
   * the DLQ's is written a read_committed reader does not see the records; until the offsets' is, a
   * stable read of them is refused (UNSTABLE_OFFSET_COMMIT), and the producer's next transaction
   * waits (librdkafka retries CONCURRENT_TRANSACTIONS). An abort's markers hide the records for good.
   */
  endTransaction(id: string, epoch: number, commit: boolean, member: string): void {
    const t = this.#current(id, epoch, commit ? "commit" : "abort");
    const records = t.records, offsets = t.offsets;
    if (commit) this.dlqDecided.push(...records);
    const pending = new Set(offsets.map((o) => o.partition));
    for (const p of pending) this.#unstable.set(p, (this.#unstable.get(p) ?? 0) + 1);
    const dlqMarker = new Promise<void>((resolve) =>
      this.sched.at(this.#markerMs(), () => {
        if (commit) for (const r of records) this.dlq.push({ ...r, appendedAt: this.sched.now });
        resolve();
      }),
    );
    const offsetsMarker = new Promise<void>((resolve) =>
      this.sched.at(this.#markerMs(), () => {
        for (const p of pending) this.#unstable.set(p, this.#unstable.get(p)! - 1);
        if (commit)
          for (const o of offsets) {
            const offset = Number(o.offset);
            this.onCommit({ partition: o.partition, offset, member, at: this.sched.now });
            this.committed.set(o.partition, { offset, metadata: o.metadata ?? "" });
          }
        resolve();
      }),
    );
    t.markers = Promise.all([dlqMarker, offsetsMarker]).then(() => {});
    t.open = false;
    t.records = [];
    t.offsets = [];
  }

  /** Resolves once the markers of `id`'s last transaction are written: its next one may begin. */
  markersWritten(id: string): Promise<void> {
    return this.#txns.get(id)?.markers ?? Promise.resolve();
  }

  /** A marker's write after EndTxn's decision: one request from the coordinator to the partition's leader. */
  #markerMs(): number {
    return this.sched.int(1, 40);
  }

  #current(id: string, epoch: number, what: string): SimTxn {
    const t = this.#txns.get(id);
    if (!t || t.epoch !== epoch) throw txnRefusal(what, "_FENCED", "fatal");
    return t;
  }

  /** The coordinator aborts a transaction open past its timeout and fences its producer (a new epoch). */
  #expireTransactions(): void {
    for (const [id, t] of this.#txns)
      if (t.open && this.sched.now - t.openedAt > t.timeoutMs)
        this.#txns.set(id, { epoch: t.epoch + 1, open: false, openedAt: 0, timeoutMs: t.timeoutMs, records: [], offsets: [], markers: t.markers });
  }

  #latency(): number {
    return this.sched.int(1, 5);
  }

  #release(): void {
    const held = this.#held.splice(0);
    for (const h of held) h.go();
  }

  #expire(): void {
    const now = this.sched.now;
    let gone = false;
    for (const [id, m] of this.#members) {
      const silent = now - m.lastHeartbeat > this.opts.sessionTimeoutMs;
      const stuck = this.#rebalancing && !m.joined && now - this.#rebalanceStarted > this.opts.maxPollIntervalMs;
      const owing = this.kip848 && m.owesSince != null && now - m.owesSince > this.opts.maxPollIntervalMs;
      if (owing) this.#fenced.add(id);
      if (silent || stuck || owing) {
        if (silent) this.expiredSilent.push({ member: id, at: now, lastHeartbeat: m.lastHeartbeat });
        this.#members.delete(id);
        gone = true;
      }
    }
    if (gone) this.#startRebalance();
    else this.#maybeComplete();
  }

  /**
   * Eager: every member that holds partitions gives them all up and rejoins. Cooperative: every
   * member that holds partitions rejoins keeping them (its heartbeat says so, as eager's does).
   */
  #startRebalance(): void {
    if (this.kip848) return this.#reconcile();
    if (!this.#rebalancing) this.#rebalanceStarted = this.sched.now;
    this.#rebalancing = true;
    for (const m of this.#members.values()) if (m.assignment.length > 0) m.joined = false;
    this.#maybeComplete();
  }

  /** Assignments change incrementally: cooperative-sticky, or KIP-848's consumer protocol. */
  get cooperative(): boolean {
    return this.opts.protocol === "cooperative" || this.kip848;
  }

  get kip848(): boolean {
    return this.opts.protocol === "consumer";
  }

  /**
   * KIP-848: the coordinator computes each member's target at once and sends it with the member's
   * next heartbeat answer (here: one request's latency); the group epoch moves.
   */
  #reconcile(): void {
    const members = [...this.#members.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    this.#generation++;
    this.#assignCooperative(members);
    const asked = this.sched.now;
    for (const m of members) {
      if ((m.revoking ?? []).length > 0) m.owesSince ??= asked;
      const gen = this.#generation, assignment = [...m.assignment];
      m.client.coordinatorRequest("ConsumerGroupHeartbeat", () => null).then(() => m.client.assigned(m.id, gen, assignment, asked));
    }
  }

  /**
   * A member that gave up partitions under cooperative-sticky rejoins, or acknowledges under KIP-848,
   * saying what it owns now: a rebalance hands out what it no longer owns. A partition it still owns
   * stays its own (a target that came while another revocation was pending is owed yet, and its
   * rebalance timeout runs on), and the rebalance asks for it again.
   */
  revoked(id: string, owned: readonly number[]): void {
    const m = this.#members.get(id);
    if (!m) return;
    m.lastHeartbeat = this.sched.now;
    m.revoking = (m.revoking ?? []).filter((p) => owned.includes(p));
    if (m.revoking.length === 0) m.owesSince = null;
    this.#startRebalance();
  }

  /** The eager assignment: partition p to the p-th member, round robin, from nothing. */
  #assignEager(members: Member[]): void {
    for (const m of members) m.assignment = [];
    for (let p = 0; p < this.opts.partitions && members.length > 0; p++) members[p % members.length]!.assignment.push(p);
  }

  /**
   * The cooperative-sticky assignment: each member keeps what it owns up to its share; a partition
   * owned by nobody goes to a member under its share; one that must move is taken from its owner now
   * and given in the next rebalance, once the owner has revoked it and rejoined.
   */
  #assignCooperative(members: Member[]): void {
    const n = members.length;
    if (n === 0) return;
    const share = (i: number) => Math.floor(this.opts.partitions / n) + (i < this.opts.partitions % n ? 1 : 0);
    // Owned, or still being given up by a member that has not acknowledged it: not free.
    const owned = new Set(members.flatMap((m) => [...m.assignment, ...(m.revoking ?? [])]));
    const target = members.map((m, i) => m.assignment.filter((p) => p < this.opts.partitions).slice(0, share(i)));
    const moving = members.flatMap((m, i) => m.assignment.slice(share(i)));
    const free = Array.from({ length: this.opts.partitions }, (_, p) => p).filter((p) => !owned.has(p));
    for (const p of [...free, ...moving]) {
      const i = target.findIndex((t, k) => t.length < share(k));
      if (i >= 0) target[i]!.push(p);
    }
    // What moves from one member to another is given only once its owner has given it up.
    const movingSet = new Set(moving);
    members.forEach((m, i) => {
      const next = target[i]!.filter((p) => !movingSet.has(p) || m.assignment.includes(p));
      m.revoking = [...(m.revoking ?? []), ...m.assignment.filter((p) => !next.includes(p))];
      m.assignment = next;
    });
  }

  #maybeComplete(): void {
    if (!this.#rebalancing) return;
    const members = [...this.#members.values()];
    if (members.some((m) => !m.joined)) return;
    this.#rebalancing = false;
    this.#generation++;
    members.sort((a, b) => (a.id < b.id ? -1 : 1));
    if (this.cooperative) this.#assignCooperative(members);
    else this.#assignEager(members);
    for (const m of members) {
      const gen = this.#generation, assignment = [...m.assignment];
      m.client.coordinatorRequest("SyncGroup", () => null).then(() => m.client.assigned(m.id, gen, assignment));
    }
  }
}

/** A group member as the worker's loop and delivery see it (GroupConsumer). */
export class SimConsumer {
  #memberId: string | null = null;
  /** The member id the coordinator gave the last join, known here once its answer or assignment arrives. */
  #joining: string | null = null;
  #generation = -1;
  #assignment: TopicPartition[] = [];
  #pendingRevoke: TopicPartition[] | null = null;
  #revokeLost = false;
  /** Cooperative: partitions the assignment that asked for a revocation also gave, assigned once it settles. */
  #addedAfterRevoke: number[] = [];
  /** A heartbeat sent and not yet answered (nor timed out). */
  #heartbeatInFlight = false;
  /** KIP-848: fenced while a revocation was pending; librdkafka stops heartbeating and acts once it ends. */
  #fencedDeferred = false;
  #assigned: TopicPartition[][] = [];
  readonly #paused = new Set<number>();
  /** Next offset to fetch, and fetched records not yet handed out, per partition. */
  readonly #fetchAt = new Map<number, number>();
  readonly #fetched = new Map<number, Message[]>();
  #lastHeartbeatOk: number;
  readonly #waiting: Array<() => void> = [];
  #closed = false;
  #commitChain: Promise<unknown> = Promise.resolve();
  readonly #inFlight: Array<{ answer: (() => void) | null; timedOut: boolean }> = [];
  /** heartbeat-facts.patch's facts: send times of the last accepted, answered-ok, refused heartbeat; 0: none. */
  readonly #facts = { accepted: 0, ok: 0, refused: 0, refusedErr: 0, rebalance: 0 };
  /** Standings taken, served only by a poll, as librdkafka serves its statistics callback. */
  #standings: Standing[] = [];
  readonly #standingListeners: Array<(standing: Standing) => void> = [];

  constructor(
    readonly kafka: SimKafka,
    readonly actor: Actor,
  ) {
    this.#lastHeartbeatOk = kafka.sched.now;
    this.#join();
    const beat = () => {
      if (this.#closed) return;
      this.#heartbeat();
      kafka.sched.at(HEARTBEAT_MS, beat, actor);
    };
    kafka.sched.at(HEARTBEAT_MS, beat, actor);
    // librdkafka's fetcher fills the prefetch queue whether or not the loop polls.
    const fetch = () => {
      if (this.#closed) return;
      if (kafka.reachable(actor)) this.#fetch();
      kafka.sched.at(50, fetch, actor);
    };
    kafka.sched.at(50, fetch, actor);
    const stats = () => {
      if (this.#closed) return;
      this.#statistics();
      kafka.sched.at(STATISTICS_MS, stats, actor);
    };
    kafka.sched.at(kafka.sched.int(1, STATISTICS_MS), stats, actor);
  }

  onStanding(fn: (standing: Standing) => void): void {
    this.#standingListeners.push(fn);
  }

  /**
   * A request (`_type`, its name for the reader) on the coordinator connection, its answer handed
   * over in the order the requests were sent (one TCP connection). One unanswered past `timeoutMs`
   * times out, and its answer, if it comes, matches no request and is dropped (the returned promise
   * never settles).
   */
  coordinatorRequest<T>(_type: string, handle: () => T, timeoutMs = Number.POSITIVE_INFINITY): Promise<T> {
    const slot: { answer: (() => void) | null; timedOut: boolean } = { answer: null, timedOut: false };
    this.#inFlight.push(slot);
    const cancel = Number.isFinite(timeoutMs)
      ? this.kafka.sched.at(timeoutMs, () => {
          slot.timedOut = true;
          this.#handOver();
        }, this.actor)
      : () => {};
    return new Promise<T>((resolve, reject) => {
      const arrived = (settle: () => void) => {
        if (slot.timedOut) return;
        cancel();
        slot.answer = settle;
        this.#handOver();
      };
      this.kafka.request(this.actor, handle).then(
        (v) => arrived(() => resolve(v)),
        (e) => arrived(() => reject(e)),
      );
    });
  }

  /** Answers that arrived, oldest request first; a request that timed out no longer holds the line. */
  #handOver(): void {
    for (;;) {
      const head = this.#inFlight[0];
      if (!head || (!head.answer && !head.timedOut)) return;
      this.#inFlight.shift();
      head.answer?.();
    }
  }

  #statistics(): void {
    const f = this.#facts;
    // librdkafka's statistics as the patch writes them, on the virtual clock (µs), read by the worker's code.
    const us = (ms: number) => ms * 1_000;
    const stats = {
      cgrp: {
        hb_accepted_ts: us(f.accepted),
        hb_refused_ts: us(f.refused),
        hb_refused_err: f.refusedErr,
        hb_rebalance_ts: us(f.rebalance),
      },
    };
    const standing = standingOf(stats, (t) => t / 1_000);
    if (standing) this.#standings.push(standing);
    this.wake();
  }

  get assignment(): readonly TopicPartition[] {
    return this.#assignment;
  }
  /** Whether the coordinator counts this member in the group now. */
  get isMember(): boolean {
    return this.#memberId !== null && this.kafka.hasMember(this.#memberId);
  }
  get pendingRevoke(): readonly TopicPartition[] | null {
    return this.#pendingRevoke;
  }
  get revokeLost(): boolean {
    return this.#revokeLost;
  }
  takeAssigned(): TopicPartition[][] {
    const a = this.#assigned;
    this.#assigned = [];
    return a;
  }

  waitForMessages(timeoutMs: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        cancel();
        resolve();
      };
      const cancel = this.kafka.sched.at(
        timeoutMs,
        () => {
          const i = this.#waiting.indexOf(done);
          if (i >= 0) this.#waiting.splice(i, 1);
          resolve();
        },
        this.actor,
      );
      this.#waiting.push(done);
    });
  }

  wake(): void {
    for (const w of this.#waiting.splice(0)) w();
  }

  poll(max = 1000, revoking = false): Message[] {
    if (this.#closed || (this.#pendingRevoke && !revoking) || max <= 0) return [];
    for (const standing of this.#standings.splice(0)) for (const fn of this.#standingListeners) fn(standing);
    if (this.kafka.reachable(this.actor)) this.#fetch();
    const out: Message[] = [];
    for (const tp of this.#assignment) {
      if (this.#paused.has(tp.partition)) continue;
      const q = this.#fetched.get(tp.partition);
      while (q && q.length > 0 && out.length < max) out.push(q.shift()!);
      if (out.length >= max) break;
    }
    return out;
  }

  /** The member id and generation as this member holds them now (rd_kafka_consumer_group_metadata). */
  groupMetadata(): SimGroupMetadata {
    return { member: this.#memberId ?? "", generation: this.#generation, destroy: () => {} };
  }

  commit(offsets: readonly TopicPartition[]): Promise<TopicPartition[]> {
    const id = this.#memberId, gen = this.#generation;
    const run = () => this.coordinatorRequest("OffsetCommit", () => this.kafka.commit(id ?? "", gen, offsets));
    const p = this.#commitChain.then(run, run);
    this.#commitChain = p.catch(() => {});
    return p;
  }

  pause(partitions: readonly TopicPartition[]): void {
    for (const { partition } of partitions) {
      this.#paused.add(partition);
      // Fetched records of a paused partition are dropped; it fetches again from the first of them.
      const q = this.#fetched.get(partition);
      if (q && q.length > 0) this.#fetchAt.set(partition, q[0]!.offset);
      this.#fetched.delete(partition);
    }
  }

  resume(partitions: readonly TopicPartition[]): void {
    for (const { partition } of partitions) this.#paused.delete(partition);
  }

  completeRevoke(): void {
    const revoked = this.#pendingRevoke;
    if (!revoked) return;
    const lost = this.#revokeLost;
    this.#pendingRevoke = null;
    this.#revokeLost = false;
    const gone = new Set(revoked.map((r) => r.partition));
    this.#assignment = this.#assignment.filter((a) => !gone.has(a.partition));
    for (const { partition } of revoked) {
      this.#fetched.delete(partition);
      this.#fetchAt.delete(partition);
      this.#paused.delete(partition);
    }
    // Cooperative: what came with the revocation is assigned once it settled, and the member
    // rejoins so that the partitions it gave up are handed out.
    const added = this.#addedAfterRevoke;
    this.#addedAfterRevoke = [];
    if (this.kafka.kip848) this.#facts.rebalance = 0;
    // A fence heard while the revocation was pending (librdkafka defers it): the rest is lost now.
    if (this.#fencedDeferred) {
      this.#fencedDeferred = false;
      this.#lost();
      return;
    }
    if (this.kafka.cooperative && !lost) {
      if (added.length > 0) this.#add(added);
      const id = this.#memberId;
      const owned = this.#assignment.map((a) => a.partition);
      if (id !== null) void this.coordinatorRequest("JoinGroup", () => this.kafka.revoked(id, owned));
      return;
    }
    this.#rejoin();
  }

  async close(): Promise<boolean> {
    if (this.#closed) return true;
    this.#closed = true;
    const id = this.#memberId;
    if (id !== null) await this.coordinatorRequest("LeaveGroup", () => this.kafka.leave(id));
    return true;
  }

  /**
   * The coordinator's assignment reached this member. `askedAt`: under KIP-848, when the coordinator
   * computed it, standing for the send time of the heartbeat whose answer carried it.
   */
  assigned(memberId: string, generation: number, partitions: number[], askedAt?: number): void {
    // The assignment can overtake the join's answer (they are two requests): the id it was given counts.
    if (this.#closed || (memberId !== this.#memberId && memberId !== this.#joining)) return;
    this.#setMember(memberId);
    this.#generation = generation;
    if (this.kafka.cooperative) {
      // Reconciling a revocation (or a loss): the target that follows its acknowledgement counts.
      if (this.#pendingRevoke) return;
      // Incremental: partitions it owns and no longer gets are revoked first; new ones come after.
      const now = new Set(partitions);
      const had = new Set(this.#assignment.map((a) => a.partition));
      const revoked = this.#assignment.filter((a) => !now.has(a.partition));
      const added = partitions.filter((p) => !had.has(p));
      if (revoked.length > 0) {
        this.#pendingRevoke = revoked;
        this.#addedAfterRevoke = added;
        // heartbeat-facts.patch under KIP-848: a revocation owed since the heartbeat that asked for it.
        if (this.kafka.kip848) this.#facts.rebalance = Math.max(1, askedAt ?? this.kafka.sched.now);
      } else if (added.length > 0) this.#add(added);
      this.wake();
      return;
    }
    this.#assignment = [];
    this.#add(partitions);
    this.wake();
  }

  /** Partitions assigned: fetched from the group's commit, handed to the worker as newly assigned. */
  #add(partitions: number[]): void {
    const tps = partitions.map((partition) => ({ topic: RAW, partition }));
    this.#assignment = [...this.#assignment, ...tps];
    // The commit as it stands, even while a transaction holds offsets of the partition: harsher than
    // librdkafka's read_committed consumer, whose offset fetch waits for them (require_stable), so
    // delivery must not lean on that wait (replays.ts skips what the check's commit passes).
    for (const p of partitions) {
      this.#fetchAt.set(p, this.kafka.committed.get(p)?.offset ?? 0);
      this.#fetched.delete(p);
      this.#paused.delete(p);
    }
    this.#assigned.push(tps);
  }

  #fetch(): void {
    for (const { partition } of this.#assignment) {
      if (this.#paused.has(partition)) continue;
      let q = this.#fetched.get(partition);
      if (!q) this.#fetched.set(partition, (q = []));
      const log = this.kafka.raw[partition]!;
      let at = this.#fetchAt.get(partition) ?? 0;
      while (q.length < this.kafka.opts.prefetch && at < log.length) {
        const r = log[at]!;
        q.push({ topic: RAW, partition, offset: at, timestamp: r.timestamp, value: r.value, key: null });
        at++;
      }
      this.#fetchAt.set(partition, at);
    }
  }

  #join(): void {
    this.coordinatorRequest("JoinGroup", () => (this.#joining = this.kafka.join(this))).then((id) => {
      if (this.#joining !== id) return;
      this.#setMember(id);
      this.#lastHeartbeatOk = this.kafka.sched.now;
    });
  }

  #setMember(id: string): void {
    this.#memberId = id;
  }

  #rejoin(): void {
    const id = this.#memberId;
    if (id === null) return this.#join();
    this.coordinatorRequest("JoinGroup", () => this.kafka.rejoin(id)).then((known) => {
      if (!known && this.#memberId === id) {
        this.#memberId = null;
        this.#join();
      }
    });
  }

  #heartbeat(): void {
    const now = this.kafka.sched.now;
    // librdkafka's own session check: no heartbeat answered for a session, the assignment is lost.
    // Only in the join state steady (rd_kafka_cgrp_serve): not while a revocation waits for the
    // application, nor while a fence waits for it to end (KIP-848); librdkafka says nothing then
    // (measured: a member fenced mid-revocation declared no loss for minutes).
    const overdue = now - this.#lastHeartbeatOk > this.kafka.opts.sessionTimeoutMs;
    if (this.#memberId !== null && !this.#fencedDeferred && !this.#pendingRevoke && overdue) this.#lost();
    const id = this.#memberId;
    if (id === null || this.#fencedDeferred || !this.kafka.reachable(this.actor)) return;
    // One heartbeat in flight at a time (librdkafka's HEARTBEAT_IN_TRANSIT): a slow answer delays the next.
    if (this.#heartbeatInFlight) return;
    // A heartbeat is not retried: one the network drops is simply missing, and times out.
    const timeout = this.kafka.opts.sessionTimeoutMs;
    // Dated as the patch dates it: enqueued for sending (0 on the virtual clock is "none": at least 1).
    const sent = Math.max(1, now);
    const f = this.#facts;
    const refuse = (err: number) => {
      f.refused = sent;
      f.refusedErr = err;
    };
    let answered = false;
    this.#heartbeatInFlight = true;
    this.kafka.sched.at(timeout, () => {
      if (answered) return;
      this.#heartbeatInFlight = false;
      refuse(-185 /* _TIMED_OUT */);
    }, this.actor);
    this.coordinatorRequest("Heartbeat", () => this.kafka.heartbeat(id), timeout).then((answer) => {
      answered = true;
      this.#heartbeatInFlight = false;
      if (answer === "unknown") refuse(25 /* UNKNOWN_MEMBER_ID */);
      else if (answer === "fenced") refuse(110 /* FENCED_MEMBER_EPOCH */);
      else {
        f.accepted = sent;
        // KIP-848: an owed revocation's start stays until it is acknowledged (completeRevoke).
        if (answer === "ok") [f.ok, f.rebalance] = [sent, this.kafka.kip848 ? f.rebalance : 0];
        else if (f.rebalance === 0) f.rebalance = f.ok || 1;
      }
      if (this.#memberId !== id) return;
      // KIP-848: librdkafka treats both refusals alike, a rejoin deferred while the revocation is pending.
      const notMember = answer === "fenced" || (answer === "unknown" && this.kafka.kip848);
      if (notMember && this.#pendingRevoke && !this.#revokeLost) {
        this.#fencedDeferred = true;
        return;
      }
      if (answer === "unknown" || answer === "fenced") return this.#lost();
      this.#lastHeartbeatOk = this.kafka.sched.now;
      if (answer === "rebalance" && !this.#pendingRevoke) {
        // Cooperative: it rejoins at once, keeping what it owns.
        if (this.#assignment.length === 0 || this.kafka.cooperative) this.#rejoin();
        else {
          this.#pendingRevoke = [...this.#assignment];
        }
        this.wake();
      }
    });
  }

  /** The group gave this member's partitions to others: what it holds must not be flushed. */
  #lost(): void {
    this.#memberId = null;
    this.#joining = null;
    this.#generation = -1;
    if (this.#assignment.length > 0) {
      this.#pendingRevoke = [...this.#assignment];
      this.#revokeLost = true;
    } else this.#join();
    this.wake();
  }
}

/** The DLQ producer of one worker (RecordProducer): each record delivered once, perhaps late. */
export class SimProducer {
  constructor(
    readonly kafka: SimKafka,
    readonly actor: Actor,
    readonly clock: () => number,
  ) {}

  produce(
    topic: string,
    value: string | Uint8Array | null,
    opts: { headers?: Record<string, string> | Array<[string, string | Uint8Array]> } = {},
  ): Promise<{ partition: number; offset: number }> {
    const bytes = typeof value === "string" ? new TextEncoder().encode(value) : (value ?? new Uint8Array());
    const headers = headerList(opts.headers);
    const timestamp = this.clock();
    const sentAt = this.kafka.sched.now;
    const source = envelopeSource(headers);
    const zombie = source !== null && this.kafka.ownerOf(source.partition) !== this.actor.name;
    return this.kafka.request(this.actor, () => {
      if (this.kafka.sched.now - sentAt > this.kafka.opts.messageTimeoutMs)
        throw kafkaRefusal(`produce to ${topic}`, "_MSG_TIMED_OUT");
      const appendedAt = this.kafka.sched.now;
      const record = { value: bytes, headers, timestamp, producer: this.actor.name, sentAt, appendedAt, zombie };
      this.kafka.dlq.push(record);
      this.kafka.dlqDecided.push(record);
      return { partition: 0, offset: this.kafka.dlq.length - 1 };
    });
  }
}

export interface SimGroupMetadata {
  member: string;
  generation: number;
  destroy(): void;
}

/**
 * The DLQ producer of one worker under exactly-once (TransactionalProducer): records go into the
 * open transaction and show when it commits. A send that failed (held past message.timeout.ms)
 * makes the transaction abortable, as librdkafka does. Calls never block here: each is a request.
 */
export class SimTransactions {
  #epoch = -1;
  #outstanding = new Set<Promise<unknown>>();
  #failed = false;
  #fatal: TransactionError | null = null;

  constructor(
    readonly kafka: SimKafka,
    readonly actor: Actor,
    readonly id: string,
    readonly clock: () => number,
    readonly timeoutMs: number,
  ) {}

  async init(): Promise<void> {
    this.#epoch = await this.kafka.request(this.actor, () => this.kafka.initTransactions(this.id, this.timeoutMs));
  }

  begin(): void {
    if (this.#fatal) throw this.#fatal;
    this.#failed = false;
  }

  produce(
    topic: string,
    value: string | Uint8Array | null,
    opts: { headers?: Record<string, string> | Array<[string, string | Uint8Array]> } = {},
  ): Promise<{ partition: number; offset: number }> {
    if (this.#fatal) return Promise.reject(this.#fatal);
    const bytes = typeof value === "string" ? new TextEncoder().encode(value) : (value ?? new Uint8Array());
    const headers = headerList(opts.headers);
    const sentAt = this.kafka.sched.now;
    const source = envelopeSource(headers);
    const zombie = source !== null && this.kafka.ownerOf(source.partition) !== this.actor.name;
    const record: DlqRecord = { value: bytes, headers, timestamp: this.clock(), producer: this.actor.name, sentAt, appendedAt: -1, zombie };
    const epoch = this.#epoch;
    const sent = this.kafka.markersWritten(this.id).then(() => this.kafka.request(this.actor, () => {
      if (this.kafka.sched.now - sentAt > this.kafka.opts.messageTimeoutMs)
        throw kafkaRefusal(`produce to ${topic}`, "_MSG_TIMED_OUT");
      this.kafka.txnProduce(this.id, epoch, record);
      return { partition: 0, offset: -1 };
    }));
    const tracked = sent.catch((e: unknown) => {
      if (e instanceof TransactionError && e.fatal) this.#fatal = e;
      else this.#failed = true;
    });
    this.#outstanding.add(tracked);
    void tracked.finally(() => this.#outstanding.delete(tracked));
    return sent;
  }

  async flush(): Promise<void> {
    while (this.#outstanding.size > 0) await Promise.all([...this.#outstanding]);
  }

  async sendOffsets(offsets: readonly TopicPartition[], group: SimGroupMetadata): Promise<void> {
    if (this.#fatal) throw this.#fatal;
    const epoch = this.#epoch;
    const copy = offsets.map((o) => ({ ...o }));
    await this.kafka.markersWritten(this.id);
    await this.kafka.request(this.actor, () => this.kafka.txnOffsets(this.id, epoch, group.member, group.generation, copy));
    // Written, its answer lost: librdkafka's call times out, and a retry can help (the offsets go again).
    if (this.#answerLost("TxnOffsetCommit")) {
      await this.#wait(this.timeoutMs);
      throw txnRefusal("send offsets", "_TIMED_OUT", "retry");
    }
  }

  #answerLost(request: "EndTxn" | "TxnOffsetCommit"): boolean {
    const lost = this.kafka.txnAnswersLost.get(this.actor.name);
    return lost !== undefined && lost.request === request && this.kafka.sched.now < lost.until;
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => this.kafka.sched.at(ms, resolve, this.actor));
  }

  async commit(): Promise<void> {
    await this.flush();
    if (this.#fatal) throw this.#fatal;
    if (this.#failed) throw txnRefusal("commit transaction", "_MSG_TIMED_OUT", "abort");
    const epoch = this.#epoch;
    await this.#end(epoch, true);
  }

  async abort(): Promise<void> {
    await this.flush();
    if (this.#fatal) throw this.#fatal;
    await this.#end(this.#epoch, false);
    this.#failed = false;
  }

  /** Given up: every later call fails, as a destroyed handle's would (its requests still in flight land or not). */
  close(): void {
    this.#fatal ??= txnRefusal("closed producer", "_FENCED", "fatal");
  }

  async #end(epoch: number, commit: boolean): Promise<void> {
    try {
      await this.kafka.request(this.actor, () => this.kafka.endTransaction(this.id, epoch, commit, this.actor.name));
      // Written, its answer lost: the call never returns, and the worker gives it up past its limit
      // (kafka/transaction.ts: twice the timeout and 10 s), the producer failed for good.
      if (this.#answerLost("EndTxn")) {
        await this.#wait(2 * this.timeoutMs + 10_000);
        throw txnRefusal(commit ? "commit transaction" : "abort transaction", "_TIMED_OUT", "fatal");
      }
    } catch (e) {
      if (e instanceof TransactionError && e.fatal) this.#fatal = e;
      throw e;
    }
  }
}

function headerList(h: Record<string, string> | Array<[string, string | Uint8Array]> | undefined) {
  const enc = new TextEncoder();
  const list: Array<[string, string | Uint8Array]> = !h ? [] : Array.isArray(h) ? h : Object.entries(h);
  return list.map(([k, v]) => [k, typeof v === "string" ? enc.encode(v) : v] as [string, Uint8Array]);
}

/** The replay check's reader of the DLQ (RangeReader): what the log holds when it is read. */
export class SimDlqReader {
  #positions = new Map<number, number>();
  #ends = new Map<number, number>();
  constructor(readonly kafka: SimKafka) {}

  assign(partitions: readonly TopicPartition[]): void {
    this.#ends.clear();
    this.#positions = new Map(partitions.map((p) => [p.partition, Number(p.offset ?? 0)]));
  }

  poll(): Message[] {
    const out: Message[] = [];
    for (const [p, at] of this.#positions) {
      const log = this.kafka.dlq;
      for (let o = at; o < log.length; o++) {
        const r = log[o]!;
        out.push({ topic: DLQ, partition: p, offset: o, timestamp: r.timestamp, value: r.value, key: null, headers: r.headers });
      }
      this.#positions.set(p, log.length);
      this.#ends.set(p, log.length);
    }
    return out;
  }

  endReached(partition: number): number | undefined {
    return this.#ends.get(partition);
  }

  queryWatermarks(): { low: number; high: number } {
    return { low: 0, high: this.kafka.dlq.length };
  }
}

/** The admin lookups of the replay check (OffsetLookup's listOffsets), as requests from `a`. */
export function simLookup(kafka: SimKafka, a: Actor) {
  return {
    listOffsets: (topic: string, partitions: readonly number[], spec: "earliest" | "latest" | number) =>
      kafka.request(a, () => {
        const length = (p: number) => (topic === DLQ ? kafka.dlq.length : kafka.raw[p]!.length);
        return new Map(
          partitions.map((p) => {
            if (spec === "earliest") return [p, 0];
            if (spec === "latest") return [p, length(p)];
            const log = topic === DLQ ? kafka.dlq : kafka.raw[p]!;
            const i = log.findIndex((r) => r.timestamp >= spec);
            return [p, i];
          }),
        );
      }),
  };
}
