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

export const KNOWN: readonly KnownCause[] = [];

/** The known cause a signature shows, if any. */
export function knownCause(signature: string): KnownCause | undefined {
  const cause = signature.slice(signature.indexOf("/") + 1);
  return KNOWN.find((k) => k.causes.includes(cause));
}
