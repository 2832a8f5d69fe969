/**
 * The group protocols exactly-once is held to: librdkafka's default (classic, eager assignors),
 * cooperative-sticky on the classic protocol, which users choose, and KIP-848's consumer protocol,
 * which docs/internals.md recommends to operators scaling many workers. `env` selects one for the
 * worker (KAFKA_PROP_*), `id` names it as scripts/chaos/kill-loop.ts reports it; under KIP-848 the session is the broker's (6 s on the test brokers).
 */
export const GROUP_PROTOCOLS = [
  { id: "classic", name: "classic", env: {} as Record<string, string> },
  {
    id: "cooperative-sticky",
    name: "cooperative-sticky",
    env: { KAFKA_PROP_PARTITION_ASSIGNMENT_STRATEGY: "cooperative-sticky" } as Record<string, string>,
  },
  { id: "consumer", name: "consumer (KIP-848)", env: { KAFKA_PROP_GROUP_PROTOCOL: "consumer" } as Record<string, string> },
] as const;

/** The protocols beside the default, for runs the default already has a test of its own for. */
export const OTHER_PROTOCOLS = GROUP_PROTOCOLS.slice(1);
