/**
 * Provenance only a worker can write. An envelope's `dlq.source.*` headers tell the replay check
 * and the audit which raw record it stands for; anyone who may write to the DLQ topic could forge
 * them and make the next owner skip a valid record. With DLQ_PROVENANCE_KEY set, every envelope
 * also carries
 *   dlq.source.sha256       the SHA-256 of the record's payload as the worker read it (UTF-8 text),
 *   dlq.source.mac          HMAC-SHA256(key, the MAC's input), hex, and
 *   dlq.source.mac.version  3: the input names the group, the DLQ topic and the table, the source
 *                           (topic, partition, offset, digest), the envelope's bytes and every
 *                           other header the worker writes. So the MAC proves the whole envelope:
 *                           its reason, field, time, stage, attempts and flags too, not only its
 *                           source, and workers of two groups that share a key do not accept each
 *                           other's envelopes.
 * The forms before proved the source only: 2 (the scope and the source) and the first (the source
 * alone, no version header). They verify as such until DLQ_PROVENANCE_OLDER_FORMS_UNTIL, when set:
 * the DLQ's retention past the upgrade (docs/security.md). The check and the audit count an envelope as delivered
 * for offset N only when its MAC is right; the check also skips the raw record at N only when its
 * payload has that SHA-256 (an envelope of another record at the same offset, e.g. of a topic
 * deleted and made again, is not taken for it), and `dlq replay` sends only envelopes whose MAC and
 * digest verify. Keys rotate: DLQ_PROVENANCE_KEYS_PREVIOUS verifies, never signs. Threat model:
 * docs/security.md "Provenance the DLQ cannot forge".
 */
import { timingSafeEqual } from "node:crypto";
import { CdrWorkerError } from "../errors.ts";
import { type EnvelopeSource as SignedSource } from "./envelope.ts";
import { feedMacInput } from "./mac-input.ts";

/** Fewest characters a signing key may have: 128 bits as hex (`openssl rand -hex 16` gives 32). */
export const MIN_KEY_CHARS = 32;
/** Fewest characters a previous (verifying) key may have: what signing keys needed before. */
export const MIN_PREVIOUS_KEY_CHARS = 16;
/** The MAC's form this worker writes (dlq.source.mac.version): the whole envelope. */
export const MAC_VERSION = "3";
/** The form before it, which proves the source only; it and the first verify until the cutoff. */
export const SOURCE_MAC_VERSION = "2";

/** A DLQ record as it lies in the topic (a Message), or as the worker is about to send it: what form 3 covers. */
export interface EnvelopeBytes {
  value: Uint8Array | string | null;
  headers?: ReadonlyArray<readonly [string, Uint8Array | string]> | undefined;
}

/**
 * What a key proves of an envelope: the whole of it (form 3), its source only (the older forms,
 * until the cutoff), or nothing (null).
 */
export type Proof = "whole" | "source" | null;

/** When the older forms stop verifying (ms since the epoch), and the clock that says when now is. */
export interface OlderForms {
  until?: number | undefined;
  now?: () => number;
}

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
export type { SignedSource };

export class ProvenanceKey {
  readonly #keys: Buffer[];
  /** A hasher keyed with each key, copied for each MAC of form 3. */
  readonly #keyed: Bun.CryptoHasher[];
  readonly #scope: string;
  readonly #olderUntil: number | undefined;
  readonly #now: () => number;

  constructor(key: string, scope: MacScope, previous: readonly string[] = [], older: OlderForms = {}) {
    if (key.length < MIN_KEY_CHARS)
      throw new CdrWorkerError("CONFIG_INVALID", `DLQ_PROVENANCE_KEY: at least ${MIN_KEY_CHARS} characters`);
    if (previous.some((k) => k.length < MIN_PREVIOUS_KEY_CHARS))
      throw new CdrWorkerError(
        "CONFIG_INVALID",
        `DLQ_PROVENANCE_KEYS_PREVIOUS: each at least ${MIN_PREVIOUS_KEY_CHARS} characters`,
      );
    this.#keys = [key, ...previous].map((k) => Buffer.from(k, "utf8"));
    this.#keyed = this.#keys.map((k) => new Bun.CryptoHasher("sha256", k));
    // Newlines separate the fields; none of them holds one (Kafka and ClickHouse names cannot).
    this.#scope = `${scope.group}\n${scope.dlqTopic}\n${scope.table}`;
    this.#olderUntil = older.until;
    this.#now = older.now ?? Date.now;
  }

  /**
   * The MAC of an envelope (hex) in the current form, with the signing key: over its source, its
   * value and every header the worker writes (`bytes.headers`, without the MAC's own).
   */
  signEnvelope(topic: string, partition: number, offset: number, digest: string, bytes: EnvelopeBytes): string {
    return this.#wholeMac(0, topic, partition, offset, digest, bytes)!;
  }

  /** The MAC of a source record (hex) in the form before (2), which proves the source only. */
  sign(topic: string, partition: number, offset: number, digest: string): string {
    return this.#mac(this.#keys[0]!, SOURCE_MAC_VERSION, topic, partition, offset, digest);
  }

  /**
   * What this key proves of an envelope whose headers name `src`: the whole envelope when its MAC is
   * of the current form and covers `bytes` as they are; its source when it is of an older form and
   * the cutoff has not passed; else nothing. Any key, the signing one or a previous one.
   */
  proves(src: SignedSource | null, bytes: EnvelopeBytes): Proof {
    if (!src?.digest || !src.mac) return null;
    const { topic, partition, offset, digest, mac, macVersion } = src;
    if (macVersion !== MAC_VERSION)
      return this.verify(topic, partition, offset, digest, mac, macVersion) ? "source" : null;
    if (!HEX64.test(mac) || !HEX64.test(digest)) return null;
    let ok = false;
    for (let key = 0; key < this.#keys.length; key++) {
      const expected = this.#wholeMac(key, topic, partition, offset, digest, bytes);
      ok = (expected !== null && sameHex(expected, mac)) || ok;
    }
    return ok ? "whole" : null;
  }

  /**
   * True when `mac` is the MAC of the source by the signing key or a previous one, in the older form
   * `version` names (undefined: the first form), compared in constant time; false for every form
   * once the cutoff has passed. Form 3 is proves()'s: it needs the envelope's bytes.
   */
  verify(topic: string, partition: number, offset: number, digest: string, mac: string, version?: string): boolean {
    if (!HEX64.test(mac) || !HEX64.test(digest)) return false;
    if (version !== undefined && version !== SOURCE_MAC_VERSION) return false;
    if (this.#olderUntil !== undefined && this.#now() >= this.#olderUntil) return false;
    const given = Buffer.from(mac, "hex");
    let ok = false;
    for (const key of this.#keys) {
      const expected = Buffer.from(this.#mac(key, version ?? "1", topic, partition, offset, digest), "hex");
      ok = timingSafeEqual(expected, given) || ok;
    }
    return ok;
  }

  /**
   * Form 3 over the source, the value and the worker's headers (mac-input.ts). Null when a header
   * the worker writes appears twice. From the key's hasher made once: keying one per envelope cost
   * a fifth of the MAC.
   */
  #wholeMac(
    key: number,
    topic: string,
    partition: number,
    offset: number,
    digest: string,
    bytes: EnvelopeBytes,
  ): string | null {
    const h = this.#keyed[key]!.copy();
    const prefix = `v${MAC_VERSION}\n${this.#scope}\n${topic}\n${partition}\n${offset}\n${digest}\n`;
    return feedMacInput(h, prefix, bytes.value, bytes.headers) ? h.digest("hex") : null;
  }

  #mac(key: Buffer, version: string, topic: string, partition: number, offset: number, digest: string): string {
    const source = `${topic}\n${partition}\n${offset}\n${digest}`;
    const input = version === "1" ? source : `v${version}\n${this.#scope}\n${source}`;
    // HMAC-SHA256: a hasher given a key.
    return new Bun.CryptoHasher("sha256", key).update(input).digest("hex");
  }
}

/**
 * Two MACs as lowercase hex (HEX64) compared in time independent of where they differ, as
 * timingSafeEqual compares bytes: decoding the given MAC to bytes for it cost the DLQ filler
 * 0.4 µs an envelope.
 */
function sameHex(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
