/**
 * Provenance only a worker can write. An envelope's `dlq.source.*` headers tell the replay check
 * and the audit which raw record it stands for; anyone who may write to the DLQ topic could forge
 * them and make the next owner skip a valid record. With DLQ_PROVENANCE_KEY set, every envelope
 * also carries
 *   dlq.source.sha256       the SHA-256 of the record's payload as the worker read it (UTF-8 text),
 *   dlq.source.mac          HMAC-SHA256(key, the MAC's input), hex, and
 *   dlq.source.mac.version  2: the input names the group, the DLQ topic and the table beside the
 *                           source (topic, partition, offset, digest), so workers of two groups
 *                           that share the topics and a key do not accept each other's envelopes.
 * Envelopes without the version header carry the first form (the source alone): they verify as
 * such for as long as the DLQ keeps them. The check and the audit count an envelope as delivered
 * for offset N only when its MAC is right; the check also skips the raw record at N only when its
 * payload has that SHA-256 (an envelope of another record at the same offset, e.g. of a topic
 * deleted and made again, is not taken for it), and `dlq replay` sends only envelopes whose MAC and
 * digest verify. Keys rotate: DLQ_PROVENANCE_KEYS_PREVIOUS verifies, never signs. Threat model:
 * docs/security.md "Provenance the DLQ cannot forge".
 */
import { timingSafeEqual } from "node:crypto";
import { CdrWorkerError } from "../errors.ts";

/** Fewest characters a signing key may have: 128 bits as hex (`openssl rand -hex 16` gives 32). */
export const MIN_KEY_CHARS = 32;
/** Fewest characters a previous (verifying) key may have: what signing keys needed before. */
export const MIN_PREVIOUS_KEY_CHARS = 16;
/** The MAC's form this worker writes (dlq.source.mac.version). */
export const MAC_VERSION = "2";

/** What a MAC binds an envelope to beside its source: where it was written, for whom. */
export interface MacScope {
  group: string;
  dlqTopic: string;
  /** `<database>.<table>`. */
  table: string;
}

/**
 * The SHA-256 of a payload's text (UTF-8), hex. Bun's hasher rather than node:crypto's, as for the
 * MAC: every envelope pays both, and with them an envelope costs 2.7–3.1 µs to write against
 * 3.9–4.6 (scripts/bench/envelope.ts).
 */
export function payloadDigest(payload: string): string {
  return Bun.SHA256.hash(payload, "hex");
}

const HEX64 = /^[0-9a-f]{64}$/;

/** A source record as an envelope's headers name it (dlq/envelope.ts `envelopeSource`). */
export interface SignedSource {
  topic: string;
  partition: number;
  offset: number;
  digest?: string;
  mac?: string;
  macVersion?: string;
}

/**
 * Whether an envelope is the worker's: its MAC verifies for its source, and its payload, whose
 * SHA-256 is `payloadSha256`, is the one the MAC's digest names.
 */
export function provenBy(key: ProvenanceKey, src: SignedSource | null, payloadSha256: string): boolean {
  if (!src?.digest || !src.mac) return false;
  const { topic, partition, offset, digest, mac, macVersion } = src;
  return payloadSha256 === digest && key.verify(topic, partition, offset, digest, mac, macVersion);
}

export class ProvenanceKey {
  readonly #keys: Buffer[];
  readonly #scope: string;

  constructor(key: string, scope: MacScope, previous: readonly string[] = []) {
    if (key.length < MIN_KEY_CHARS)
      throw new CdrWorkerError("CONFIG_INVALID", `DLQ_PROVENANCE_KEY: at least ${MIN_KEY_CHARS} characters`);
    if (previous.some((k) => k.length < MIN_PREVIOUS_KEY_CHARS))
      throw new CdrWorkerError(
        "CONFIG_INVALID",
        `DLQ_PROVENANCE_KEYS_PREVIOUS: each at least ${MIN_PREVIOUS_KEY_CHARS} characters`,
      );
    this.#keys = [key, ...previous].map((k) => Buffer.from(k, "utf8"));
    // Newlines separate the fields; none of them holds one (Kafka and ClickHouse names cannot).
    this.#scope = `${scope.group}\n${scope.dlqTopic}\n${scope.table}`;
  }

  /** The MAC of a source record (hex), in the current form, with the signing key. */
  sign(topic: string, partition: number, offset: number, digest: string): string {
    return this.#mac(this.#keys[0]!, MAC_VERSION, topic, partition, offset, digest);
  }

  /**
   * True when `mac` is the MAC of the source by the signing key or a previous one, in the form
   * `version` names (undefined: the first form), compared in constant time.
   */
  verify(topic: string, partition: number, offset: number, digest: string, mac: string, version?: string): boolean {
    if (!HEX64.test(mac) || !HEX64.test(digest)) return false;
    if (version !== undefined && version !== MAC_VERSION) return false;
    const given = Buffer.from(mac, "hex");
    let ok = false;
    for (const key of this.#keys) {
      const expected = Buffer.from(this.#mac(key, version ?? "1", topic, partition, offset, digest), "hex");
      ok = timingSafeEqual(expected, given) || ok;
    }
    return ok;
  }

  #mac(key: Buffer, version: string, topic: string, partition: number, offset: number, digest: string): string {
    const source = `${topic}\n${partition}\n${offset}\n${digest}`;
    const input = version === "1" ? source : `v${version}\n${this.#scope}\n${source}`;
    // HMAC-SHA256: a hasher given a key.
    return new Bun.CryptoHasher("sha256", key).update(input).digest("hex");
  }
}
