/** A JSON object, as librdkafka's statistics nest them (heartbeat-proof.ts, fetch-state.ts). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
