/**
 * Provenance only a worker can write. An envelope's `dlq.source.*` headers tell the replay check
 * and the audit which raw record it stands for; anyone who may write to the DLQ topic could forge
 * them and make the next owner skip a valid record. With DLQ_PROVENANCE_KEY set, every envelope
 * also carries
 *   dlq.source.sha256  the SHA-256 of the record's payload as the worker read it (UTF-8 text), and
 *   dlq.source.mac     HMAC-SHA256(key, topic \n partition \n offset \n sha256), hex,
 * and the check and the audit count an envelope as delivered for offset N only when its MAC is
 * right; the check also skips the raw record at N only when its payload has that SHA-256 (an
 * envelope of another record at the same offset, e.g. of a topic deleted and made again, is not
 * taken for it). Threat model: docs/security.md "Provenance the DLQ cannot forge".
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { CdrWorkerError } from "../errors.ts";

/** Fewest characters a key may have: 128 bits of a hex or base64 secret. */
export const MIN_KEY_CHARS = 16;

/** The SHA-256 of a payload's text (UTF-8), hex. */
export function payloadDigest(payload: string): string {
  return createHash("sha256").update(payload, "utf8").digest("hex");
}

export class ProvenanceKey {
  readonly #key: Buffer;

  constructor(key: string) {
    if (key.length < MIN_KEY_CHARS)
      throw new CdrWorkerError("CONFIG_INVALID", `DLQ_PROVENANCE_KEY: at least ${MIN_KEY_CHARS} characters`);
    this.#key = Buffer.from(key, "utf8");
  }

  /** The MAC of a source record (hex). */
  sign(topic: string, partition: number, offset: number, digest: string): string {
    return createHmac("sha256", this.#key).update(`${topic}\n${partition}\n${offset}\n${digest}`).digest("hex");
  }

  /** True when `mac` is this key's MAC of the source (compared in constant time). */
  verify(topic: string, partition: number, offset: number, digest: string, mac: string): boolean {
    if (!/^[0-9a-f]{64}$/.test(mac) || !/^[0-9a-f]{64}$/.test(digest)) return false;
    return timingSafeEqual(Buffer.from(this.sign(topic, partition, offset, digest), "hex"), Buffer.from(mac, "hex"));
  }
}
