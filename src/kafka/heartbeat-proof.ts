/**
 * Proof that the coordinator accepted one of this member's heartbeats, read from librdkafka's
 * statistics, for the membership lease (delivery/membership.ts). librdkafka 2.15 shows no heartbeat
 * answer, and a transactional commit proves membership without keeping the session: the session runs
 * from the member's last heartbeat the coordinator received, and a TxnOffsetCommit is the producer's
 * request. The statistics show the group coordinator's connection (the logical broker
 * `GroupCoordinator`): requests sent by type, requests awaiting an answer, answers received. A
 * sample z, a later sample b, and the sample c after b prove that a heartbeat sent after z was
 * accepted when:
 * - at z, no request awaited an answer on that connection (the latest such sample before b);
 * - by b, an answer arrived that matched a request (rx rose, rxcorriderrs did not), and no request
 *   type but Heartbeat was sent (ConsumerGroupHeartbeat, KIP-848's, is never listed): so the answer
 *   is a heartbeat's, sent after z;
 * - from z to c the group stayed `up` (its state's age covers the span), in one join state where
 *   heartbeats go on, with the same member id, no rebalance begun, and no coordinator asked for anew
 *   (FindCoordinator, on any broker): an answer that refused the heartbeat changes one of these once
 *   librdkafka handles it, on the thread that writes the statistics, before the sample after.
 * An accepted heartbeat (REBALANCE_IN_PROGRESS included) restarts the session where the coordinator
 * received it, after z; so the member is in the group at least until z + session.timeout.ms. The
 * statistics interval should divide no heartbeat interval (kafka-clients.ts): a sample taken each
 * time a heartbeat is on its way would never find the connection idle.
 */

/** The coordinator connection's counters: requests awaiting an answer, answers received, requests sent by type. */
export interface CoordinatorLink {
  waitresp: number;
  rx: number;
  /** Answers that matched no request (one that timed out). */
  rxcorriderrs: number;
  requests: Readonly<Record<string, number>>;
}

/** What one statistics sample says of the group and its coordinator's connection. */
export interface CoordinatorSample {
  /** When librdkafka took it, in the process's monotonic milliseconds. */
  at: number;
  /** The member id when the sample reached the worker ("" while the member has none). */
  member: string;
  group: { state: string; stateAgeMs: number; joinState: string; rebalances: number };
  /** The coordinator's connection; null while there is none. */
  coordinator: CoordinatorLink | null;
  /** FindCoordinator requests sent to every broker. */
  findCoordinator: number;
}

/** Join states in which librdkafka heartbeats and the worker may still send (steady, or a revocation it settles). */
const HEARTBEATING = new Set(["steady", "wait-unassign-call"]);

/** Request types a heartbeat's proof admits between a and b (ConsumerGroupHeartbeat is not listed at all). */
const HEARTBEAT = "Heartbeat";

/** Samples kept: an idle one is looked for this far back. */
const HISTORY = 12;

export class HeartbeatProofs {
  #samples: CoordinatorSample[] = [];

  /** Takes the next sample; returns the monotonic ms a heartbeat the coordinator accepted was sent after, if proven. */
  take(sample: CoordinatorSample): number | null {
    const samples = this.#samples;
    samples.push(sample);
    if (samples.length > HISTORY) samples.shift();
    for (let i = samples.length - 3; i >= 0; i--)
      if (samples[i]!.coordinator?.waitresp === 0) return proves(samples.slice(i)) ? samples[i]!.at : null;
    return null;
  }
}

/** `span`: z (idle), then samples up to b, then c. */
function proves(span: readonly CoordinatorSample[]): boolean {
  const z = span[0]!, b = span.at(-2)!, c = span.at(-1)!;
  const cz = z.coordinator, cb = b.coordinator;
  if (!cz || !cb || cb.rx <= cz.rx || cb.rxcorriderrs !== cz.rxcorriderrs) return false;
  for (const type of new Set([...Object.keys(cz.requests), ...Object.keys(cb.requests)]))
    if (type !== HEARTBEAT && (cz.requests[type] ?? 0) !== (cb.requests[type] ?? 0)) return false;
  const steady = span.every(
    (s) =>
      s.coordinator !== null &&
      s.member !== "" &&
      s.member === z.member &&
      s.group.state === "up" &&
      s.group.joinState === z.group.joinState &&
      HEARTBEATING.has(s.group.joinState) &&
      s.group.rebalances === z.group.rebalances &&
      s.findCoordinator === z.findCoordinator,
  );
  return steady && c.group.stateAgeMs >= Math.ceil(c.at - z.at);
}

/** The logical broker librdkafka names for the group coordinator's connection. */
const COORDINATOR = "GroupCoordinator";

/**
 * A sample from librdkafka's statistics JSON (STATISTICS.md), or null where it lacks what a proof
 * needs. `toMono` turns its `ts` (librdkafka's monotonic clock, µs) into the process's monotonic ms.
 */
export function coordinatorSample(
  json: string,
  member: string,
  toMono: (us: number) => number,
): CoordinatorSample | null {
  let stats: unknown;
  try {
    stats = JSON.parse(json);
  } catch {
    return null;
  }
  return coordinatorSampleOf(stats, member, toMono);
}

/** The same from statistics already parsed (the consumer reads other parts of them too). */
export function coordinatorSampleOf(
  stats: unknown,
  member: string,
  toMono: (us: number) => number,
): CoordinatorSample | null {
  if (!isObject(stats) || typeof stats.ts !== "number") return null;
  if (!isObject(stats.cgrp) || !isObject(stats.brokers)) return null;
  const { cgrp } = stats;
  if (typeof cgrp.state !== "string" || typeof cgrp.join_state !== "string") return null;
  if (typeof cgrp.stateage !== "number" || typeof cgrp.rebalance_cnt !== "number") return null;
  let coordinator: CoordinatorSample["coordinator"] = null;
  let findCoordinator = 0;
  for (const b of Object.values(stats.brokers)) {
    if (!isObject(b) || !isObject(b.req)) return null;
    const requests = counts(b.req);
    if (!requests) return null;
    findCoordinator += requests.FindCoordinator ?? 0;
    if (b.source !== "logical" || typeof b.name !== "string" || !b.name.startsWith(COORDINATOR)) continue;
    const { waitresp_cnt, rx, rxcorriderrs } = b;
    if (typeof waitresp_cnt !== "number" || typeof rx !== "number" || typeof rxcorriderrs !== "number") return null;
    coordinator = { waitresp: waitresp_cnt, rx, rxcorriderrs, requests };
  }
  return {
    at: toMono(stats.ts),
    member,
    group: { state: cgrp.state, stateAgeMs: cgrp.stateage, joinState: cgrp.join_state, rebalances: cgrp.rebalance_cnt },
    coordinator,
    findCoordinator,
  };
}

/** A JSON object, as librdkafka's statistics nest them (fetch-state.ts reads them too). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function counts(req: Record<string, unknown>): Record<string, number> | null {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(req)) {
    if (typeof v !== "number") return null;
    out[k] = v;
  }
  return out;
}
