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
  {
    causes: ["lost-answer-read"],
    fixtures: ["epoch-zero-lost-answer-read"],
    why:
      "the lost-answer check reads the table by the batch's session_start_time range: a valid record with " +
      "epoch_start 0 makes it a scan of the whole table, which times out and is retried for ever",
  },
  {
    causes: ["replayed-view-lacks-row"],
    fixtures: ["view-fails-replayed"],
    why: "the offsets view failed after the table's write: the next check reads the view and stores the rows again",
  },
  {
    causes: ["replayed-outside-window", "replayed-missed-envelope", "check-missed-row"],
    fixtures: ["clock-step-replayed", "clock-step-check-missed-row"],
    why:
      "the checks bound their reads by wall-clock times (the commit's since, a batch's first ingested_at): " +
      "a wall clock stepped back, by as little as crosses a second, leaves stored rows or envelopes out",
  },
];

/** The known cause a signature shows, if any. */
export function knownCause(signature: string): KnownCause | undefined {
  const cause = signature.slice(signature.indexOf("/") + 1);
  return KNOWN.find((k) => k.causes.includes(cause));
}
