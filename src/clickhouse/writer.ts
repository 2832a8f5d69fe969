/**
 * Inserts a batch of preformatted TSV lines: one HTTP request, acknowledged or thrown. With several
 * endpoints (CLICKHOUSE_URL=a,b,…: replicas of one shard, or load balancers in front of them) an
 * insert that fails as transient goes to the next endpoint at once; only when every endpoint
 * failed does it count as one attempt against the retry budget. A data error is the same on every
 * endpoint and is thrown at once. The endpoint that last took an insert is tried first.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { Readable } from "node:stream";
import { classifyInsertError, type ClickHouseInsertError } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";

/**
 * Pins how DateTime text is read, on every supported server (row-format.ts says why). 18.16
 * knows the setting too: test/clickhouse/compat.test.ts inserts with it on 18.16 and the current engine.
 */
export const INSERT_SETTINGS = { date_time_input_format: "basic" } as const;

/** One ClickHouse endpoint and what the worker saw of it (README "Stats"). */
export interface Endpoint {
  /** host:port, never the credentials. */
  readonly name: string;
  readonly client: ClickHouseClient;
  up: boolean;
  inserts: number;
  failures: number;
}

export class ClickHouseWriter {
  readonly #endpoints: Endpoint[];
  readonly #table: string;
  #current = 0;

  constructor(
    ch: ClickHouseClient | ReadonlyArray<{ name: string; client: ClickHouseClient }>,
    database: string,
    table: string,
  ) {
    const list = Array.isArray(ch) ? ch : [{ name: "clickhouse", client: ch as ClickHouseClient }];
    this.#endpoints = list.map(({ name, client }) => ({ name, client, up: true, inserts: 0, failures: 0 }));
    this.#table = `${database}.${table}`;
  }

  /** Each endpoint's health and counts, for stats. */
  get endpoints(): readonly Endpoint[] {
    return this.#endpoints;
  }

  /**
   * Resolves once ClickHouse acknowledged every row of `body` (TSV, one row per line); throws a
   * ClickHouseInsertError that says whether a resend, a split or neither can help.
   */
  async insert(body: Uint8Array | string, rows: number): Promise<void> {
    const n = this.#endpoints.length;
    let last: ClickHouseInsertError | undefined;
    for (let k = 0; k < n; k++) {
      const i = (this.#current + k) % n;
      const e = this.#endpoints[i]!;
      try {
        await this.#insertInto(e, body, rows);
        e.up = true;
        e.inserts++;
        this.#current = i;
        return;
      } catch (err) {
        last = err as ClickHouseInsertError;
        if (last.kind !== "transient") throw last;
        e.up = false;
        e.failures++;
      }
    }
    throw last!;
  }

  async #insertInto(e: Endpoint, body: Uint8Array | string, rows: number): Promise<void> {
    const what = `insert of ${rows} rows into ${this.#table}${this.#endpoints.length > 1 ? ` at ${e.name}` : ""}`;
    try {
      await this.#send(e.client, body);
    } catch (first) {
      // A kept-alive socket the server closed meanwhile fails at once with a reset, before the
      // server read the body: resent at once instead of waiting out a retry delay (should the
      // server have stored it after all, the replay collapses by cdr_id like any other).
      if (!isReset(first)) throw classifyInsertError(first, what);
      try {
        await this.#send(e.client, body);
      } catch (cause) {
        throw classifyInsertError(cause, what);
      }
    }
  }

  async #send(client: ClickHouseClient, body: Uint8Array | string): Promise<void> {
    await client.insert({
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

  /** Pings every endpoint (and records which answer); true when at least one does. */
  async ping(): Promise<boolean> {
    const answers = await Promise.all(
      this.#endpoints.map(async (e) => {
        try {
          e.up = (await e.client.ping()).success;
        } catch {
          e.up = false;
        }
        return e.up;
      }),
    );
    return answers.some(Boolean);
  }
}

function isReset(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE" || (e instanceof Error && /socket hang up/i.test(e.message));
}
