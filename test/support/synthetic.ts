/** Synthetic vendor CDRs into a topic, counting what the worker must store and dead-letter. */
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { props } from "./kafka.ts";

/** Produces `count` synthetic records; returns how many are valid and the invalid ones' count. */
export async function produceSynthetic(topic: string, count: number, invalidShare: number, seed: number): Promise<{ valid: number; invalid: number }> {
  const gen = new SyntheticCdrs({ seed, invalidShare, idPrefix: `s${seed}` });
  const p = new Producer({ ...props, "linger.ms": "20" });
  let valid = 0;
  try {
    for (let sent = 0; sent < count; sent += 10_000) {
      const values = Array.from({ length: Math.min(10_000, count - sent) }, () => {
        const r = gen.next();
        if (!r.defect) valid++;
        return r.text;
      });
      await p.produceBatch(topic, values);
    }
  } finally {
    p.close();
  }
  return { valid, invalid: count - valid };
}

/**
 * A steady stream of valid records: `perRound` every `pauseMs` (seeds from `seed` on) until stopped
 * or `rounds` have gone. `sent()` says how many went, all valid; `stop()` ends it and waits for the
 * round under way.
 */
export function steadyStream(topic: string, opts: { perRound: number; pauseMs: number; seed: number; rounds: number }) {
  let sent = 0, streaming = true;
  const done = (async () => {
    for (let round = 0; streaming && round < opts.rounds; round++) {
      sent += (await produceSynthetic(topic, opts.perRound, 0, opts.seed + round)).valid;
      await Bun.sleep(opts.pauseMs);
    }
  })();
  return {
    sent: () => sent,
    stop: async () => {
      streaming = false;
      await done;
    },
  };
}
