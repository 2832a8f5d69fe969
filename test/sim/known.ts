/**
 * The causes of violation the simulation finds on the delivery code as it is, each with fixtures
 * (fixtures/) that keep a shrunk schedule showing it. A cause is matched on a signature's second
 * part (`stored-twice/zombie-insert` has the cause `zombie-insert`), so one cause covers every
 * invariant it breaks. The exploration in CI reports these and fails on any other; a fix removes
 * its entry here and turns its fixtures' `expect` to "none".
 */
export interface KnownCause {
  /** The causes, as they end a signature. */
  causes: readonly string[];
  fixtures: readonly string[];
  why: string;
}

export const KNOWN: readonly KnownCause[] = [
  {
    causes: ["held-envelope", "zombie-insert", "zombie-dead-letter"],
    fixtures: ["kafka-cut-envelopes-twice", "kafka-cut-stored-and-dead-lettered", "kafka-cut-zombie-insert"],
    why:
      "a worker cut off from Kafka but not from ClickHouse: its held DLQ sends are delivered when the cut " +
      "heals, after its successor dead-lettered or stored the same records, and until librdkafka declares " +
      "its session lost it inserts and dead-letters what it holds after its successor's check",
  },
];

/** The known cause a signature shows, if any. */
export function knownCause(signature: string): KnownCause | undefined {
  const cause = signature.slice(signature.indexOf("/") + 1);
  return KNOWN.find((k) => k.causes.includes(cause));
}
