/**
 * What the coordinator answered this member's heartbeats, read as facts from librdkafka's statistics,
 * for the membership lease (delivery/membership.ts). librdkafka 2.15 shows no heartbeat answer of its
 * own; scripts/librdkafka/patches/heartbeat-facts.patch records, on either group protocol, the time
 * each answered heartbeat was enqueued for sending (no later than the coordinator received it):
 * - `hb_accepted_ts`: the last one the coordinator accepted, which restarted the member's session
 *   (classic: REBALANCE_IN_PROGRESS too);
 * - `hb_refused_ts`, `hb_refused_err`: the last one answered with any other error, the coordinator's
 *   (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, an authorization error) or the connection's;
 * - `hb_rebalance_ts`: a rebalance the member is in (classic), or a reconciliation it owes (KIP-848),
 *   began after this; 0 while none. The group removes a member that has not rejoined, or fences one
 *   that has not revoked, a rebalance timeout (max.poll.interval.ms) after that start.
 * Answers come one at a time (librdkafka keeps one heartbeat in flight), so the later of the two
 * times says which answer came last.
 */
import { isObject } from "./json-object.ts";

/** The member's standing in the group, on the process's monotonic clock (ms). */
export type Standing =
  /** The last answer accepted a heartbeat sent after `sentAfter`; a rebalance began after `rebalanceSince`. */
  | { kind: "accepted"; sentAfter: number; rebalanceSince: number | null }
  /** The last answer was an error (`err`, librdkafka's code): nothing proves the session. */
  | { kind: "refused"; err: number }
  /** The statistics show the group and none of the patch's facts: the library lacks the patch. */
  | { kind: "unpatched" };

/** The facts the patch adds to the statistics' `cgrp`, librdkafka's monotonic µs (0: none yet). */
interface HeartbeatFacts {
  accepted: number;
  refused: number;
  refusedErr: number;
  rebalance: number;
}

/**
 * The standing the statistics show, or null while no heartbeat was answered (or the facts do not
 * read as the patch writes them); "unpatched" where the group shows without the patch's fields.
 * `toMono` turns librdkafka's monotonic µs into the process's monotonic ms.
 */
export function standingOf(stats: unknown, toMono: (us: number) => number): Standing | null {
  const facts = factsOf(stats);
  if (!facts) return lacksFacts(stats) ? { kind: "unpatched" } : null;
  if (facts.accepted === 0 && facts.refused === 0) return null;
  // Equal times are one request answered twice (an error, then its retry's): the error is the later word.
  if (facts.refused >= facts.accepted) return { kind: "refused", err: facts.refusedErr };
  const rebalanceSince = facts.rebalance === 0 ? null : toMono(facts.rebalance);
  return { kind: "accepted", sentAfter: toMono(facts.accepted), rebalanceSince };
}

function factsOf(stats: unknown): HeartbeatFacts | null {
  if (!isObject(stats) || !isObject(stats.cgrp)) return null;
  const { hb_accepted_ts, hb_refused_ts, hb_refused_err, hb_rebalance_ts } = stats.cgrp;
  const all = [hb_accepted_ts, hb_refused_ts, hb_refused_err, hb_rebalance_ts];
  if (!all.every((v) => typeof v === "number" && Number.isFinite(v))) return null;
  return {
    accepted: hb_accepted_ts as number,
    refused: hb_refused_ts as number,
    refusedErr: hb_refused_err as number,
    rebalance: hb_rebalance_ts as number,
  };
}

/** The group shows in the statistics, and none of the patch's facts: a library without it. */
function lacksFacts(stats: unknown): boolean {
  return isObject(stats) && isObject(stats.cgrp) && !("hb_accepted_ts" in stats.cgrp);
}
