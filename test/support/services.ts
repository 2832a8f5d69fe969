/** Where the real services that scripts/services.sh started live, and unique names per test. */
import { createClient, type ClickHouseClient } from "@clickhouse/client";

export const KAFKA_BROKERS = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092";
export const CLICKHOUSE_URL = process.env.CLICKHOUSE_URL ?? "http://127.0.0.1:8123";
/** The test endpoint around ClickHouse 26.9's engine (scripts/clickhouse/chdb-http.py). */
export const CLICKHOUSE_CURRENT_URL = process.env.CLICKHOUSE_CURRENT_URL ?? "http://127.0.0.1:8127";

export interface ClickHouseServer {
  name: string;
  url: string;
  /** What `SELECT version()` answers there. */
  version: RegExp;
  /** Current releases refuse a block spanning more than max_partitions_per_insert_block (100) partitions. */
  limitsPartitionsPerInsert: boolean;
}

/** Every ClickHouse a ClickHouse-facing suite runs on (docs/compatibility.md). */
export const CLICKHOUSE_SERVERS: readonly ClickHouseServer[] = [
  { name: "ClickHouse 18.16", url: CLICKHOUSE_URL, version: /^18\.16\./, limitsPartitionsPerInsert: false },
  { name: "ClickHouse 26.9 engine", url: CLICKHOUSE_CURRENT_URL, version: /^26\.9\./, limitsPartitionsPerInsert: true },
];
/** The broker's SASL/PLAIN listener (scripts/kafka/server.properties: user cdr). */
export const KAFKA_SASL_BROKERS = process.env.KAFKA_SASL_BROKERS ?? "127.0.0.1:9094";
export const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** A name no other test (or earlier run) uses: tests never share topics, groups or tables. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

export function clickhouse(database = "default", url = CLICKHOUSE_URL): ClickHouseClient {
  return createClient({ url, database });
}

/** Runs a command to completion; rejects with its stderr when it exits nonzero. */
export async function run(cmd: string[], input?: string): Promise<string> {
  const proc = Bun.spawn(cmd, { stdin: input === undefined ? "ignore" : new Blob([input]), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${err}`);
  return out;
}

/** Polls `probe` until it returns a value other than undefined, or throws after `ms`. */
export async function waitFor<T>(probe: () => Promise<T | undefined> | T | undefined, ms = 20_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(25);
  }
}

/** A loopback port free now, for a server a test starts that cannot report the port it bound. */
export async function freePort(): Promise<number> {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}
