/** Inserts a batch of preformatted TSV lines: one HTTP request, acknowledged or thrown. */
import type { ClickHouseClient } from "@clickhouse/client";
import { Readable } from "node:stream";
import { classifyInsertError } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";

/**
 * Pins how DateTime text is read, on every supported server (row-format.ts says why). 18.16
 * knows the setting too: test/clickhouse/compat.test.ts inserts with it on 18.16 and the current engine.
 */
export const INSERT_SETTINGS = { date_time_input_format: "basic" } as const;

export class ClickHouseWriter {
  readonly #ch: ClickHouseClient;
  readonly #table: string;

  constructor(ch: ClickHouseClient, database: string, table: string) {
    this.#ch = ch;
    this.#table = `${database}.${table}`;
  }

  /**
   * Resolves once ClickHouse acknowledged every row of `body` (TSV, one row per line); throws a
   * ClickHouseInsertError that says whether a resend, a split or neither can help.
   */
  async insert(body: Uint8Array | string, rows: number): Promise<void> {
    try {
      await this.#send(body);
    } catch (first) {
      // A kept-alive socket the server closed meanwhile fails at once with a reset, before the
      // server read the body: resent at once instead of waiting out a retry delay (should the
      // server have stored it after all, the replay collapses by cdr_id like any other).
      if (!isReset(first)) throw classifyInsertError(first, `insert of ${rows} rows into ${this.#table}`);
      try {
        await this.#send(body);
      } catch (cause) {
        throw classifyInsertError(cause, `insert of ${rows} rows into ${this.#table}`);
      }
    }
  }

  async #send(body: Uint8Array | string): Promise<void> {
    await this.#ch.insert({
      table: this.#table,
      values: Readable.from(
        [typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)],
        { objectMode: false },
      ),
      format: "TabSeparated",
      columns: [...COLUMNS],
      clickhouse_settings: INSERT_SETTINGS,
    });
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.#ch.ping()).success;
    } catch {
      return false;
    }
  }
}

function isReset(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE" || (e instanceof Error && /socket hang up/i.test(e.message));
}
