/**
 * What one DLQ envelope costs to write on one core: the whole envelope of an invalid synthetic
 * record (JSON, headers, the provenance digest and MAC with a key), and the digest and MAC alone
 * through Bun's hasher (what the worker uses) beside node:crypto's. µs an envelope, best of 5.
 * Usage: bun scripts/bench/envelope.ts [envelopes=100000]
 */
import { createHash, createHmac } from "node:crypto";
import { decode, type Rejection } from "../../src/cdr/decode.ts";
import { PhoneNormalizer } from "../../src/cdr/phone.ts";
import { payloadDigest, ProvenanceKey } from "../../src/dlq/provenance-mac.ts";
import { DlqPublisher } from "../../src/dlq/publisher.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { bestOf5 } from "../lib/best.ts";

const N = Number(process.argv[2] ?? 100_000);
const SECRET = "bench-provenance-key-0123456789abcdef0123";
const key = new ProvenanceKey(SECRET, { group: "cdr-worker", dlqTopic: "cdr.raw.dlq", table: "cdr.cdr_records" });
const publisher = new DlqPublisher({ produce: async () => ({ partition: 0, offset: 0 }) }, {
  topic: "cdr.raw.dlq",
  workerInstance: "bench",
  storageFailureReason: "normalization_error",
  key,
});
const ctx = { phone: new PhoneNormalizer() };
const g = new SyntheticCdrs({ seed: 7, invalidShare: 1, idPrefix: "env" });
const rejections: Rejection[] = [];
while (rejections.length < 1000) {
  const d = decode(g.next().text, ctx);
  if (!d.ok) rejections.push(d.rejection);
}
const payload = rejections[0]!.payload;
const hmacInput = `v2\ncdr-worker\ncdr.raw.dlq\ncdr.cdr_records\ncdr.raw\n2\n41\n${payloadDigest(payload)}`;

const best = (fn: (i: number) => unknown) => bestOf5(N, fn);

console.log(
  JSON.stringify({
    envelopes: N,
    payload_bytes: Buffer.byteLength(payload),
    us_per_envelope: best((i) => publisher.encodeRejection(rejections[i % 1000]!, { topic: "cdr.raw", partition: 0, offset: i })),
    digest_us: { bun: best(() => payloadDigest(payload)), node_crypto: best(() => createHash("sha256").update(payload, "utf8").digest("hex")) },
    mac_us: {
      bun: best(() => key.sign("cdr.raw", 2, 41, "0".repeat(64))),
      node_crypto: best(() => createHmac("sha256", SECRET).update(hmacInput).digest("hex")),
    },
  }),
);
