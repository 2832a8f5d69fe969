/**
 * The two topics and their settings, and `topics ensure` (docs/commands.md): create what is
 * missing, repair drifted configs, never delete, and report (not fix) a partition count that differs.
 */
import type { Admin, TopicSpec } from "../kafka/admin.ts";
import { CdrWorkerError } from "../errors.ts";

export interface TopologyOptions {
  /** Replicas of each partition: 1 on a single development broker, 3 on a production cluster. */
  replicationFactor?: number;
  /** Partitions of the raw topic: the most workers one group can use. */
  partitions?: number;
}

/**
 * Replicated topics get `min.insync.replicas` so an acknowledged write (the DLQ producer uses
 * acks=all through idempotence) survives the loss of one broker: 2 of 3, or 1 of 2 (which only
 * keeps the topic writable). A single replica has nothing to set and keeps the broker's default.
 */
export function minInsyncReplicas(replicationFactor: number): number | undefined {
  return replicationFactor >= 3 ? 2 : replicationFactor === 2 ? 1 : undefined;
}

/** The DLQ topic's max.message.bytes, and what the DLQ producer may send (docs/dlq.md). */
export const DLQ_MAX_MESSAGE_BYTES = 8 << 20;

/** The raw topic's codec (DECISIONS "Topics"): what `run` expects to find (cli/preflight.ts). */
export const RAW_TOPIC_CODEC = "lz4";

export function topologySpec(rawTopic: string, dlqTopic: string, opts: TopologyOptions = {}): TopicSpec[] {
  const replicationFactor = opts.replicationFactor ?? 1;
  const minIsr = minInsyncReplicas(replicationFactor);
  const durability: Record<string, string> = minIsr ? { "min.insync.replicas": String(minIsr) } : {};
  return [
    {
      name: rawTopic,
      partitions: opts.partitions ?? 3,
      replicationFactor,
      configs: { "retention.ms": "86400000", "compression.type": RAW_TOPIC_CODEC, ...durability },
    },
    {
      name: dlqTopic,
      partitions: 1,
      replicationFactor,
      // Room for an envelope that keeps its whole payload (dlq/envelope.ts): a raw record up to the
      // raw topic's 1 MiB, escaped up to 6× when it travels as a string.
      configs: { "retention.ms": "604800000", "max.message.bytes": String(DLQ_MAX_MESSAGE_BYTES), ...durability },
    },
  ];
}

export interface TopicReport {
  topic: string;
  /**
   * `kept`: configs differ from the spec and were left as they are (`keepConfigs`). `would-create`,
   * `would-repair`: what a run would do, under `dryRun`, which changes nothing.
   */
  action: "created" | "repaired" | "kept" | "ok" | "would-create" | "would-repair";
  /** Config keys set by a repair, with their previous values. */
  repaired: Record<string, string | null>;
  /** With `keepConfigs`: config keys that differ from the spec, left alone, with both values. */
  differs?: Record<string, { spec: string; actual: string | null }>;
  /** Set when the partition count differs from the spec (left alone: shrinking loses data). */
  partitionMismatch?: { expected: number; actual: number };
  /**
   * Set when the topic's replication factor differs from the one asked for (left alone: a
   * reassignment is the operator's). min.insync.replicas follows the topic's own factor.
   */
  replicationMismatch?: { expected: number; actual: number };
}

/**
 * `keepConfigs`: an existing topic's configs are reported where they differ from the spec, never
 * changed, so an operator's own retention or limits survive every `topics ensure` (compose runs it
 * on each `up`). Missing topics are still created with the spec's configs. `dryRun`: the same
 * reports, of what would be done, and nothing created or changed.
 */
export async function ensureTopics(
  admin: Admin,
  specs: readonly TopicSpec[],
  opts: { keepConfigs?: boolean; dryRun?: boolean } = {},
): Promise<TopicReport[]> {
  const shapes = admin.topicShapes(specs.map((s) => s.name));
  const reports: TopicReport[] = [];
  const missing = specs.filter((s) => shapes.get(s.name) == null);
  if (missing.length && !opts.dryRun) {
    for (const r of await admin.createTopics(missing)) {
      // Another instance may have created it between our look and our create.
      if (r.err !== 0 && r.errName !== "TOPIC_ALREADY_EXISTS")
        throw new CdrWorkerError("TOPOLOGY", `create ${r.name}: ${r.errName}: ${r.message}`);
    }
    // Done means usable: a worker started right after (compose's one-shot `topics`) must not meet
    // a topic whose partitions have no leader yet.
    await admin.awaitServing(missing);
  }
  for (const spec of specs) {
    if (missing.includes(spec)) {
      reports.push({ topic: spec.name, action: opts.dryRun ? "would-create" : "created", repaired: {} });
      continue;
    }
    const current = await admin.describeConfigs(spec.name);
    const shape = shapes.get(spec.name)!;
    const configs = ownDurability(spec.configs, shape.replicas, current["min.insync.replicas"]?.value ?? null);
    const repaired: Record<string, string | null> = {};
    for (const [k, want] of Object.entries(configs))
      if (current[k]?.value !== want) repaired[k] = current[k]?.value ?? null;
    const actual = shape.partitions;
    const mismatch = {
      ...(actual !== spec.partitions ? { partitionMismatch: { expected: spec.partitions, actual } } : {}),
      ...(shape.replicas !== spec.replicationFactor
        ? { replicationMismatch: { expected: spec.replicationFactor, actual: shape.replicas } }
        : {}),
    };
    if (opts.keepConfigs && Object.keys(repaired).length) {
      const differs = Object.fromEntries(
        Object.entries(repaired).map(([k, was]) => [k, { spec: configs[k]!, actual: was }]),
      );
      reports.push({ topic: spec.name, action: "kept", repaired: {}, differs, ...mismatch });
      continue;
    }
    if (opts.dryRun) {
      const action = Object.keys(repaired).length ? "would-repair" : "ok";
      reports.push({ topic: spec.name, action, repaired, ...mismatch });
      continue;
    }
    if (Object.keys(repaired).length) {
      // Legacy AlterConfigs replaces the set: keep every other override the operator made.
      const keep: Record<string, string> = {};
      for (const [k, val] of Object.entries(current))
        if (val.isTopicOverride && val.value !== null) keep[k] = val.value;
      await admin.alterConfigs(spec.name, { ...keep, ...configs });
    }
    reports.push({
      topic: spec.name,
      action: Object.keys(repaired).length ? "repaired" : "ok",
      repaired,
      ...mismatch,
    });
  }
  return reports;
}

/**
 * An existing topic's configs with min.insync.replicas from its own replication factor, not the one
 * asked for: asked for 3 over topics made with 1, the spec's 2 would refuse every acks=all write. A
 * value the topic cannot meet (above its replicas) is brought down to what the factor allows.
 */
function ownDurability(
  configs: Readonly<Record<string, string>>,
  replicas: number,
  current: string | null,
): Record<string, string> {
  const out: Record<string, string> = { ...configs };
  delete out["min.insync.replicas"];
  const own = minInsyncReplicas(replicas);
  if (own !== undefined) out["min.insync.replicas"] = String(own);
  else if (current !== null && Number(current) > replicas) out["min.insync.replicas"] = "1";
  return out;
}

/** Throws TOPOLOGY naming each missing topic; `run` refuses to start without them. Their partition counts. */
export function requireTopics(admin: Admin, topics: readonly string[]): Map<string, number> {
  const counts = admin.partitionCounts(topics);
  const missing = topics.filter((t) => counts.get(t) == null);
  if (missing.length)
    throw new CdrWorkerError(
      "TOPOLOGY",
      `topic${missing.length > 1 ? "s" : ""} ${missing.join(", ")} missing; run \`cdr-worker topics ensure\``,
    );
  return counts as Map<string, number>;
}
