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
    causes: ["lease-without-heartbeats"],
    fixtures: ["kafka-cut-lease-without-heartbeats"],
    why:
      "The membership lease counts a session from the send of a transactional commit the coordinator " +
      "accepted. But the session runs from the member's last heartbeat the coordinator received, and a " +
      "TxnOffsetCommit (the producer's request) does not renew it: after a cut from the brokers shorter " +
      "than a session, the commit got through at once while the member's next heartbeat came after its " +
      "session had run out, so the member was removed inside the lease the commit gave, and its next " +
      "insert was a zombie's. The fix needs a proof from the consumer's own heartbeats, which librdkafka " +
      "2.15 does not show (its statistics show the coordinator connection's idle time).",
  },
];

/** The known cause a signature shows, if any. */
export function knownCause(signature: string): KnownCause | undefined {
  const cause = signature.slice(signature.indexOf("/") + 1);
  return KNOWN.find((k) => k.causes.includes(cause));
}
