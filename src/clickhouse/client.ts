/** The ClickHouse HTTP client of the worker, built from configuration. */
import { createClient, type ClickHouseClient } from "@clickhouse/client";
import type { Config } from "../config.ts";

export function createClickHouse(cfg: Config["clickhouse"], database?: string): ClickHouseClient {
  return createClient({
    url: cfg.url,
    username: cfg.user,
    password: cfg.password,
    database: database ?? cfg.database,
    request_timeout: cfg.requestTimeoutMs,
    // ClickHouse closes idle keep-alive sockets after its keep_alive_timeout (3 s by default), and
    // reusing one then fails the insert with ECONNRESET: a spurious retry. Loopback or LAN connects
    // cost less than that; measured no throughput difference (scripts/bench/e2e.ts).
    keep_alive: { enabled: false },
    // 18.16 predates most settings; send none by default.
    clickhouse_settings: {},
    application: "cdr-worker",
  });
}
