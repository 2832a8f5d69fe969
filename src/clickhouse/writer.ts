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

  /** Resolves once ClickHouse acknowledged every line. */
  async insert(lines: readonly string[]): Promise<void> {
    const body = lines.join("\n") + "\n";
    try {
      await this.#ch.insert({
        table: this.#table,
        values: Readable.from([body], { objectMode: false }),
        format: "TabSeparated",
        columns: [...COLUMNS],
      });
    } catch (cause) {
      throw new CdrWorkerError("CLICKHOUSE_INSERT", `insert of ${lines.length} rows into ${this.#table}: ${(cause as Error).message}`, true, { cause });
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
