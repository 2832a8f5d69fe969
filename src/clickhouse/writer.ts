/** Inserts a batch of preformatted TSV lines: one HTTP request, acknowledged or thrown. */
import type { ClickHouseClient } from "@clickhouse/client";
import { Readable } from "node:stream";
import { CdrWorkerError } from "../errors.ts";
import { COLUMNS } from "./row-format.ts";

export class ClickHouseWriter {
  readonly #ch: ClickHouseClient;
  readonly #table: string;

  constructor(ch: ClickHouseClient, database: string, table: string) {
    this.#ch = ch;
    this.#table = `${database}.${table}`;
  }

  /** Resolves once ClickHouse acknowledged every row of `body` (TSV, one row per line). */
  async insert(body: Uint8Array | string, rows: number): Promise<void> {
    try {
      await this.#ch.insert({
        table: this.#table,
        values: Readable.from([typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)], { objectMode: false }),
        format: "TabSeparated",
        columns: [...COLUMNS],
      });
    } catch (cause) {
      throw new CdrWorkerError("CLICKHOUSE_INSERT", `insert of ${rows} rows into ${this.#table}: ${(cause as Error).message}`, true, { cause });
    }
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.#ch.ping()).success;
    } catch {
      return false;
    }
  }
}
