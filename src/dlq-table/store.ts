/**
 * The DLQ table on ClickHouse, as the filler uses it: an insert that is one DLQ partition's rows, the
 * position each partition has reached (its largest stored offset), and the end of an insert whose
 * answer was lost. One endpoint, the first of CLICKHOUSE_URL: an insert whose answer was lost is
 * ended there before anything else is read or sent, so the position read after it is final; while
 * it does not answer, the filler waits.
 */
import type { ClickHouseClient, ClickHouseSettings } from "@clickhouse/client";
import { Readable } from "node:stream";
import { LIST_ANSWER_BYTES, queryText, readInsertAnswer, SMALL_ANSWER_BYTES } from "../clickhouse/answer.ts";
import { versionOf, withDeadline } from "../clickhouse/answer.ts";
import { insertSettings } from "../clickhouse/server-version.ts";
import { dlqTable, plainIdentifiers } from "../clickhouse/migrate.ts";
import type { DlqRow } from "./row.ts";
import { DLQ_INSERT_COLUMNS, DlqRowBinary } from "./row-binary.ts";

/**
 * Through a Distributed table, an insert and a later read of the position must go to the same
 * replica of the shard: a replica that has not yet fetched the last part gives a stale position, and
 * the rows past it would be stored twice. Every filler talks to one node (the first endpoint), and
 * that node sends both to its own replica where it has one, else to the first of the shard's in the
 * cluster's order. Which replica a node counts as failing is its own view, so two nodes may choose
 * apart: hence the one node. (A single server ignores both settings.)
 */
const SAME_REPLICA = { prefer_localhost_replica: 1, load_balancing: "in_order" } as const;

/** How long an ended insert may still show in system.processes before the end is tried again. */
const END_WAIT_MS = 30_000;

export interface DlqStore {
  /** Stores the rows (one DLQ partition's); the request ends by `deadlineMs` from now. */
  insert(rows: readonly DlqRow[], queryId: string, deadlineMs: number): Promise<void>;
  /** Ends the insert of `queryId` if it still runs, and waits until it has. */
  endInsert(queryId: string): Promise<void>;
  /** The largest stored DLQ offset of each partition asked that has a row. */
  positions(partitions: readonly number[]): Promise<Map<number, number>>;
  /** The payload digest of the row at a DLQ offset; null when none is there. */
  digestAt(partition: number, offset: number): Promise<string | null>;
}

export class ClickHouseDlqStore implements DlqStore {
  readonly #ch: ClickHouseClient;
  readonly #target: string;
  #settings: ClickHouseSettings | null = null;
  /**
   * Two bodies, used in turn: inserts run one at a time, so the one an insert wrote is rewritten
   * only after the next insert has ended, and a request still being torn down never reads a body
   * the next one writes. Copying each body for that instead cost the filler 0.3 µs an envelope
   * (3.6 MB allocated, copied and freed an insert under a backlog).
   */
  readonly #bodies = [new DlqRowBinary(), new DlqRowBinary()];
  #turn = 0;

  constructor(ch: ClickHouseClient, database: string, table: string) {
    plainIdentifiers({ database, table });
    this.#ch = ch;
    this.#target = `${database}.${dlqTable(table)}`;
  }

  /**
   * The insert's settings for the server's version: acknowledged once stored (no async queue), and
   * through a Distributed table once the shard holds the rows.
   */
  async #insertSettings(): Promise<ClickHouseSettings> {
    if (this.#settings) return this.#settings;
    const version = versionOf(await queryText(this.#ch, "SELECT version()", SMALL_ANSWER_BYTES));
    this.#settings = { ...insertSettings(version), insert_distributed_sync: 1, ...SAME_REPLICA };
    return this.#settings;
  }

  async insert(rows: readonly DlqRow[], queryId: string, deadlineMs: number): Promise<void> {
    const clickhouse_settings = await this.#insertSettings();
    const encoded = this.encode(rows);
    const body = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    await withDeadline(deadlineMs, `insert into ${this.#target}`, undefined, async (abort_signal) => {
      const r = await this.#ch.exec({
        query: `INSERT INTO ${this.#target} (${DLQ_INSERT_COLUMNS}) FORMAT RowBinary`,
        values: Readable.from([body], { objectMode: false }),
        query_id: queryId,
        abort_signal,
        clickhouse_settings,
        ignore_error_response: true,
      });
      // Read whole, as the worker's: the server's full words, also when they come in a 200 answer.
      await readInsertAnswer(r, abort_signal);
    });
  }

  /** The rows as the insert's RowBinary body (a view of a reused buffer, valid until the call after next). */
  protected encode(rows: readonly DlqRow[]): Uint8Array {
    const body = this.#bodies[this.#turn]!;
    this.#turn = 1 - this.#turn;
    body.reset();
    for (const r of rows) body.add(r);
    return body.bytes();
  }

  async endInsert(queryId: string): Promise<void> {
    const which = `(query_id = '${queryId}' OR initial_query_id = '${queryId}')`;
    await queryText(this.#ch, `KILL QUERY WHERE ${which} SYNC`, LIST_ANSWER_BYTES);
    const deadline = performance.now() + END_WAIT_MS;
    const running = `SELECT count() FROM system.processes WHERE ${which}`;
    while (Number((await queryText(this.#ch, running, SMALL_ANSWER_BYTES)).trim()) > 0) {
      if (performance.now() > deadline)
        throw new Error(`insert ${queryId} still runs ${END_WAIT_MS / 1000} s after its KILL`);
      await Bun.sleep(100);
    }
  }

  async digestAt(partition: number, offset: number): Promise<string | null> {
    const query =
      `SELECT payload_sha256 FROM ${this.#target} ` +
      `WHERE dlq_partition = ${Math.trunc(partition)} AND dlq_offset = ${Math.trunc(offset)} LIMIT 1`;
    const answer = (await queryText(this.#ch, query, SMALL_ANSWER_BYTES, { settings: SAME_REPLICA })).trim();
    return answer === "" ? null : answer;
  }

  async positions(partitions: readonly number[]): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    if (partitions.length === 0) return out;
    const list = partitions.map((p) => String(Math.trunc(p))).join(", ");
    const query =
      `SELECT dlq_partition, max(dlq_offset) FROM ${this.#target} ` +
      `WHERE dlq_partition IN (${list}) GROUP BY dlq_partition`;
    const answer = await queryText(this.#ch, query, LIST_ANSWER_BYTES, { settings: SAME_REPLICA });
    for (const line of answer.split("\n").filter(Boolean)) {
      const [p, o] = line.split("\t").map(Number);
      if (!Number.isInteger(p) || !Number.isInteger(o))
        throw new Error(`positions of ${this.#target}: unreadable line ${line}`);
      out.set(p!, o!);
    }
    return out;
  }
}
