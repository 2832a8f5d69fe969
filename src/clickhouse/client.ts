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
    keep_alive: { enabled: true },
    // 18.16 predates most settings; send none by default.
    clickhouse_settings: {},
    application: "cdr-worker",
  });
}
