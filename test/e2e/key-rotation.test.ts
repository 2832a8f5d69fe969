// Rotating DLQ_PROVENANCE_KEY from A to B, as docs/security.md "Rotating the key" says: envelopes A
// signed stay proven with A among the previous keys, a worker on B goes on where one on A stopped,
// and nothing is stored, dead-lettered or replayed twice. Without A the old envelopes are unproven,
// which is why the procedure keeps it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { HEADERS } from "../../src/dlq/envelope.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { committedThrough, header, props, readCommitted } from "../support/kafka.ts";
import { e2eScope, storedCounts } from "../support/e2e.ts";
import { ROOT } from "../support/services.ts";
import { produceSynthetic } from "../support/synthetic.ts";
import { startWorker, workerEnv, type Names } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();
const A = "rotation-key-a-0123456789abcdef0123456789";
const B = "rotation-key-b-0123456789abcdef0123456789";

async function cli(n: Names, env: Record<string, string>, ...args: string[]): Promise<{ code: number; summary: Record<string, unknown> }> {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env: workerEnv(n, { LOG_LEVEL: "warn", ...env }), stdout: "pipe", stderr: "pipe" });
  const [out, , code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, summary: JSON.parse(out.trim().split("\n").at(-1)!) };
}

async function runThrough(n: Names, env: Record<string, string>, total: number): Promise<void> {
  const w = await startWorker(workerEnv(n, env));
  await committedThrough(n.group, n.raw, 3, total);
  expect(await w.stop()).toBe(0);
}

test("a rotation from key A to key B loses nothing and processes nothing twice; the old envelopes need A among the previous keys", async () => {
  const n = await names("rotation");
  const first = await produceSynthetic(n.raw, 3_000, 0.1, 71);
  await runThrough(n, { DLQ_PROVENANCE_KEY: A }, 3_000);

  // Step 2 of the procedure: B signs, A verifies. The audit of what the worker on A wrote is clean.
  const rotated = { DLQ_PROVENANCE_KEY: B, DLQ_PROVENANCE_KEYS_PREVIOUS: A };
  const between = await cli(n, rotated, "audit");
  expect([between.code, between.summary.audit, between.summary.unproven_envelopes]).toEqual([0, "clean", 0]);
  // Without A the same envelopes are unproven: their records look missing.
  const withoutA = await cli(n, { DLQ_PROVENANCE_KEY: B }, "audit");
  expect([withoutA.code, withoutA.summary.audit, withoutA.summary.unproven_envelopes]).toEqual([1, "failed", first.invalid]);

  // A worker on B takes the partitions over and goes on with new records.
  const second = await produceSynthetic(n.raw, 3_000, 0.1, 72);
  await runThrough(n, rotated, 6_000);
  const after = await cli(n, rotated, "audit");
  expect([after.code, after.summary.audit, after.summary.missing, after.summary.unproven_envelopes]).toEqual([0, "clean", 0, 0]);
  const valid = first.valid + second.valid;
  const c = await storedCounts(ch, n);
  expect([c.rows, c.ids, c.offsetRows, c.offsets]).toEqual([valid, valid, valid, valid]);
  const dlq = await readCommitted(n.dlq);
  const sources = new Set(dlq.map((m) => `${header(m, HEADERS.sourcePartition)}/${header(m, HEADERS.sourceOffset)}`));
  expect([dlq.length, sources.size]).toEqual([first.invalid + second.invalid, first.invalid + second.invalid]);

  // dlq replay with the key sends only what a worker provably wrote: both keys' envelopes, not a
  // forged one (no MAC), which it counts.
  const forger = new Producer(props);
  await forger.produce(n.dlq, dlq[0]!.value!, { headers: [[HEADERS.sourceTopic, n.raw], [HEADERS.sourcePartition, "0"], [HEADERS.sourceOffset, "0"]] });
  forger.close();
  const replay = await cli(n, rotated, "dlq", "replay", "--dry-run");
  expect([replay.code, replay.summary.would_send, replay.summary.unproven_envelopes]).toEqual([0, dlq.length, 1]);
}, 180_000);
