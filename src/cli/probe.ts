/**
 * `cdr-worker probe [URL]`: a health check for an image with no shell or curl, and what a runbook
 * runs there to see a worker's answer. It asks URL (the local /readyz by default) and prints the
 * status and the first 4 KiB of the body, so `/readyz`'s reasons show; exit 0 on 200. The whole
 * exchange is bounded in time (2 s) and in bytes: a health check must not hang on what answers.
 * `--post` sends a POST instead: the operator's word to the worker (its breaker's reset).
 */
import type { ExitKind } from "../exits.ts";

const PROBE_MS = 2_000;
const BODY_SHOWN_BYTES = 4_096;

export async function probeCommand(url: string, post = false): Promise<ExitKind> {
  const signal = AbortSignal.timeout(PROBE_MS);
  try {
    const res = await fetch(url, { signal, method: post ? "POST" : "GET" });
    const body = await firstBytes(res, BODY_SHOWN_BYTES);
    console.log(`${res.status} ${body.trimEnd()}`);
    return res.status === 200 ? "OK" : "PROBE_FAILED";
  } catch (e) {
    console.error(`probe: no answer from ${url} within ${PROBE_MS} ms: ${(e as Error).message}`);
    return "PROBE_FAILED";
  }
}

/** The body's first `limit` bytes as text; the rest is not read. */
async function firstBytes(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      total += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {}); // a body cut short: the connection is not read further
  }
  const all = new Uint8Array(total);
  let off = 0;
  for (const p of parts) all.set(p, (off += p.length) - p.length);
  const text = new TextDecoder("utf-8", { fatal: false }).decode(all.subarray(0, limit));
  return total > limit ? `${text} [… cut at ${limit} bytes]` : text;
}
