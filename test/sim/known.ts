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
    causes: ["sent-after-removal"],
    fixtures: ["freeze-then-kafka-cut-sent-after-removal"],
    why:
      "a worker frozen past its session, then cut from the brokers through the freeze's 3 s verdict " +
      "window, sends the rows it held once it is back: the group removed it for silence and gave its " +
      "partitions to another, which stored them too (classic protocol, cooperative). Not yet diagnosed; " +
      "suspected: the sends " +
      "are admitted by a heartbeat accepted after the worker rejoined, before the lost assignment is " +
      "handled; a proof must belong to the generation the rows were consumed in.",
  },
];

/** The known cause a signature shows, if any. */
export function knownCause(signature: string): KnownCause | undefined {
  const cause = signature.slice(signature.indexOf("/") + 1);
  return KNOWN.find((k) => k.causes.includes(cause));
}
