/**
 * A transactional commit whose answer never came: the coordinator may have written it or not. Each
 * commit's offsets carry a nonce of their own (commit-metadata.ts); once the producer is made again,
 * the group's committed offsets say whether that nonce landed. The transaction is atomic, so all of
 * its offsets carry the nonce or none does, and one is enough to read.
 */
import { CdrWorkerError } from "../../errors.ts";
import type { TopicPartition } from "../../kafka/partition-list.ts";
import { log } from "../../log.ts";
import { readCommitNonce } from "./commit-metadata.ts";

/** A commit asked of the coordinator whose answer never came: its offsets, and the nonce they carry. */
export interface Unsettled {
  offsets: TopicPartition[];
  nonce: string;
}

/** A new nonce: tells one commit apart from every other commit of the group's offsets. */
export function commitNonce(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex");
}

/**
 * Whether the group's committed offsets carry the commit's nonce. Read until it answers: nothing of
 * the transaction is sent again before. A refusal no retry can help is thrown.
 */
export async function landed(
  read: (partitions: readonly number[]) => Promise<readonly TopicPartition[]>,
  { offsets, nonce }: Unsettled,
  sleep: (ms: number) => Promise<void>,
): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      const committed = await read(offsets.map((o) => o.partition));
      return committed.some((c) => readCommitNonce(c.metadata) === nonce);
    } catch (err) {
      if (err instanceof CdrWorkerError && !err.retryable) throw err;
      if (attempt === 1 || attempt % 10 === 0)
        log.warn("the group's offsets could not be read to learn a commit's outcome; read again", {
          attempt,
          err: err as Error,
        });
      await sleep(Math.min(5_000, 100 * 2 ** attempt));
    }
  }
}
