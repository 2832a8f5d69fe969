/**
 * Inserts a batch of rows already encoded as RowBinary (row-binary.ts): one HTTP request,
 * acknowledged or thrown. With several endpoints (CLICKHOUSE_URL=a,b,…: replicas of one shard, or
 * load balancers in front of them) an insert that one endpoint cannot take goes to the next at
 * once: transient failures (it does not answer) and permanent refusals that belong to that endpoint
 * (authentication, readonly, a missing table or database). Only when every endpoint failed does it
 * count as one attempt against the retry budget. A data or shape error is the same on every
 * endpoint and is thrown at once. The endpoint that last took an insert is tried first.
 *
 * Each endpoint's version is learned on first contact (SELECT version()), logged, and decides the
 * settings its inserts carry (server-version.ts); an endpoint that stopped answering is asked
 * again when it is back, since it may have been upgraded meanwhile.
 *
 * Every insert has a query id of INSERT_QUERY_ID_PREFIX, so that a partition's next owner can wait
 * for the inserts a killed worker left running on the server before it reads what they stored
 * (offsets/replay-check.ts); with exactly-once, an insert into a Distributed table is synchronous
 * (`insert_distributed_sync=1`): acknowledged once the shards hold the rows, not a local spool.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { Readable } from "node:stream";
import { log } from "../log.ts";
import { ClickHouseInsertError, classifyInsertError, refusal } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";
import type { DeliveredOffsets, Owned } from "../delivery/offsets/replay-check.ts";
import { insertSettings, OLDEST_TESTED, olderThanTested } from "./server-version.ts";

/** The start of every insert's query id (system.processes). */
export const INSERT_QUERY_ID_PREFIX = "cdr-worker:";
/** How often the replay check looks whether earlier inserts still run, and how long it waits in all. */
const RUNNING_POLL_MS = 100;
const RUNNING_WAIT_MS = 120_000;

export interface WriterOptions {
  /** Names this worker in its inserts' query ids (WORKER_INSTANCE). */
  instance?: string;
  /** Inserts into a Distributed table wait for the shards (exactly-once: the replay check reads them). */
  syncDistributed?: boolean;
}

/** One ClickHouse endpoint and what the worker saw of it (README "Stats"). */
export interface Endpoint {
  /** host:port, never the credentials. */
  readonly name: string;
  readonly client: ClickHouseClient;
  up: boolean;
  inserts: number;
  failures: number;
  /** `SELECT version()` of the server behind it, once it answered. */
  version: string | null;
}

export class ClickHouseWriter {
  readonly #endpoints: Endpoint[];
  readonly #table: string;
  readonly #insertQuery: string;
  readonly #queryIdPrefix: string;
  readonly #syncDistributed: boolean;
  #current = 0;
  #inserts = 0;
  #failing = false;

  constructor(
    ch: ClickHouseClient | ReadonlyArray<{ name: string; client: ClickHouseClient }>,
    database: string,
    table: string,
    opts: WriterOptions = {},
  ) {
    // The start time too: a worker restarted under the same WORKER_INSTANCE must not reuse the id
    // of an insert its killed predecessor left running (the server refuses a running id).
    this.#queryIdPrefix = `${INSERT_QUERY_ID_PREFIX}${opts.instance ?? "worker"}:${Date.now().toString(36)}:`;
    this.#syncDistributed = opts.syncDistributed ?? false;
    const list = Array.isArray(ch) ? ch : [{ name: "clickhouse", client: ch as ClickHouseClient }];
    this.#endpoints = list.map(({ name, client }) => ({
      name,
      client,
      up: true,
      inserts: 0,
      failures: 0,
      version: null,
    }));
    this.#table = `${database}.${table}`;
    this.#insertQuery = `INSERT INTO ${this.#table} (${COLUMNS.join(", ")}) FORMAT RowBinary`;
  }

  /** Each endpoint's health, version and counts, for stats. */
  get endpoints(): readonly Endpoint[] {
    return this.#endpoints;
  }

  /**
   * ClickHouse's health as the worker sees it, the one source readiness and stats read:
   * `reachable`, an endpoint took the last insert or ping sent to it; `inserting`, false from an
   * insert no endpoint took (it is being retried, or waited for) until one takes an insert again.
   * A refused row or a split is the data's doing, not ClickHouse's: it changes neither.
   */
  get health(): { reachable: boolean; inserting: boolean } {
    return { reachable: this.#endpoints.some((e) => e.up), inserting: !this.#failing };
  }

  /**
   * Resolves once ClickHouse acknowledged every row of `body` (RowBinary rows); throws a
   * ClickHouseInsertError that says whether a resend, a split or neither can help.
   */
  async insert(body: Uint8Array | string, rows: number): Promise<void> {
    const n = this.#endpoints.length;
    let transient: ClickHouseInsertError | undefined;
    let permanent: ClickHouseInsertError | undefined;
    let answered = false;
    for (let k = 0; k < n; k++) {
      const i = (this.#current + k) % n;
      const e = this.#endpoints[i]!;
      try {
        await this.#insertInto(e, body, rows);
        e.up = true;
        e.inserts++;
        this.#current = i;
        this.#failing = false;
        return;
      } catch (err) {
        const failure = err as ClickHouseInsertError;
        if (failure.kind === "data" || failure.kind === "shape") throw failure;
        e.failures++;
        if (failure.serverCode !== null) answered = true;
        if (failure.kind === "transient") {
          e.up = false;
          e.version = null;
          transient = failure;
        } else {
          permanent ??= failure;
        }
      }
    }
    // An endpoint that did not answer may take the batch later; one that refused will not.
    this.#failing = true;
    const last = (transient ?? permanent)!;
    if (answered) throw last;
    throw new ClickHouseInsertError(last.message, last.kind, { code: null }, { cause: last.cause, unreachable: true });
  }

  async #insertInto(e: Endpoint, body: Uint8Array | string, rows: number): Promise<void> {
    const what = `insert of ${rows} rows into ${this.#table}${this.#endpoints.length > 1 ? ` at ${e.name}` : ""}`;
    const version = e.version ?? (await this.#learnVersion(e, what));
    try {
      await this.#send(e.client, body, version);
    } catch (first) {
      // A kept-alive socket the server closed meanwhile fails at once with a reset, before the
      // server read the body: resent at once instead of waiting out a retry delay (should the
      // server have stored it after all, the replay collapses by cdr_id like any other).
      if (!isReset(first)) throw classifyInsertError(first, what);
      try {
        await this.#send(e.client, body, version);
      } catch (cause) {
        throw classifyInsertError(cause, what);
      }
    }
  }

  /**
   * Sent with `exec`, the whole answer read here: on a refusal the client's own error would keep
   * only the last line of a current server's text, without the row and column (insert-error.ts).
   */
  async #send(client: ClickHouseClient, body: Uint8Array | string, version: string): Promise<void> {
    const r = await client.exec({
      query: this.#insertQuery,
      values: Readable.from(
        [typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)],
        { objectMode: false },
      ),
      query_id: `${this.#queryIdPrefix}${++this.#inserts}`,
      clickhouse_settings: this.#syncDistributed
        ? { ...insertSettings(version), insert_distributed_sync: 1 }
        : insertSettings(version),
      ignore_error_response: true,
    });
    const answer = await readText(r.stream);
    const status = r.http_status_code ?? 200;
    if (status >= 300 || r.response_headers["x-clickhouse-exception-code"] !== undefined)
      throw refusal(status, r.response_headers, answer);
  }

  /** Asks the endpoint its version; a failure is classified like an insert's (it fails over alike). */
  async #learnVersion(e: Endpoint, what: string): Promise<string> {
    try {
      const rs = await e.client.query({ query: "SELECT version()", format: "TabSeparated" });
      e.version = (await rs.text()).trim();
    } catch (cause) {
      throw classifyInsertError(cause, `${what}: asking the server's version`);
    }
    log.info("ClickHouse endpoint answers", { endpoint: e.name, version: e.version });
    if (olderThanTested(e.version))
      log.warn(`ClickHouse ${e.version} at ${e.name} is older than ${OLDEST_TESTED}, the oldest release tested`, {
        endpoint: e.name,
        version: e.version,
        oldest_tested: OLDEST_TESTED,
      });
    return e.version;
  }

  /**
   * Rows of these partitions stored at or past each one's offset, ingested since its time: what a
   * partition's last owner already stored (the replay check). Asked of the endpoints in turn
   * until one answers; throws when none does.
   */
  async storedOffsets(owned: readonly Owned[]): Promise<DeliveredOffsets> {
    const from = Math.min(...owned.map((o) => o.from));
    // ingested_at is whole seconds taken for a poll before its records' holds are stamped (a pause
    // can fall between): a minute back. The bound only keeps rows of an older incarnation out.
    const since = Math.floor(Math.min(...owned.map((o) => o.since)) / 1000) - 60;
    const query =
      `SELECT kafka_partition, kafka_offset FROM ${this.#table} ` +
      `WHERE kafka_partition IN (${owned.map((o) => o.partition).join(", ")}) ` +
      `AND kafka_offset >= ${from} AND ingested_at >= toDateTime(${Math.max(0, since)})`;
    const text = await this.#onAnyEndpoint((c) => c.query({ query, format: "TabSeparated" }).then((r) => r.text()));
    const byPartition = new Map(owned.map((o) => [o.partition, o]));
    const out: DeliveredOffsets = new Map();
    for (const line of text.split("\n")) {
      if (!line) continue;
      const [p, o] = line.split("\t").map(Number) as [number, number];
      const w = byPartition.get(p);
      if (!w || o < w.from) continue;
      let list = out.get(p);
      if (!list) out.set(p, (list = []));
      list.push(o);
    }
    return out;
  }

  /**
   * Resolves once every worker insert that runs now on any endpoint that answers has ended: an
   * insert whose worker was killed goes on on the server, and must be seen before it is counted.
   */
  async insertsEnded(): Promise<void> {
    const running = async (c: ClickHouseClient, ids?: readonly string[]) => {
      const which = ids
        ? `query_id IN (${ids.map((i) => `'${i.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`).join(", ")})`
        : `query_id LIKE '${INSERT_QUERY_ID_PREFIX}%'`;
      const rs = await c.query({
        query: `SELECT query_id FROM system.processes WHERE ${which}`,
        format: "TabSeparated",
      });
      return (await rs.text()).split("\n").filter(Boolean);
    };
    await Promise.all(
      this.#endpoints.map(async (e) => {
        let ids: string[];
        try {
          ids = await running(e.client);
        } catch {
          return; // no answer: nothing it runs can store anything the check would read from another
        }
        const deadline = Date.now() + RUNNING_WAIT_MS;
        while (ids.length > 0) {
          if (Date.now() > deadline)
            throw new Error(
              `${ids.length} inserts still run at ${e.name} after ${RUNNING_WAIT_MS / 1000} s: ` +
                ids.slice(0, 3).join(", "),
            );
          await Bun.sleep(RUNNING_POLL_MS);
          ids = await running(e.client, ids);
        }
      }),
    );
  }

  async #onAnyEndpoint<T>(fn: (c: ClickHouseClient) => Promise<T>): Promise<T> {
    let last: unknown;
    for (let k = 0; k < this.#endpoints.length; k++) {
      const e = this.#endpoints[(this.#current + k) % this.#endpoints.length]!;
      try {
        return await fn(e.client);
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  /** Pings every endpoint (and records which answer, and the version of one newly back); true when one does. */
  async ping(): Promise<boolean> {
    const answers = await Promise.all(
      this.#endpoints.map(async (e) => {
        try {
          e.up = (await e.client.ping()).success;
        } catch {
          e.up = false;
        }
        if (!e.up) e.version = null;
        else if (e.version === null) await this.#learnVersion(e, `ping of ${e.name}`).catch(() => {});
        return e.up;
      }),
    );
    return answers.some(Boolean);
  }
}

async function readText(stream: AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function isReset(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE" || (e instanceof Error && /socket hang up/i.test(e.message));
}
