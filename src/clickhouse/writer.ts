/**
 * Inserts a batch of rows already encoded as RowBinary (row-binary.ts): one HTTP request,
 * acknowledged or thrown. With several endpoints (CLICKHOUSE_URL=a,b,…: replicas of one shard, or
 * load balancers in front of them) an insert that one endpoint cannot take goes to the next at
 * once: transient failures (it does not answer) and refusals of the worker that belong to that
 * endpoint (authentication, readonly, a missing table or database). Only when every endpoint failed does it
 * count as one attempt against the retry budget. A data or shape error is the same on every
 * endpoint and is thrown at once. The endpoint that last took an insert is tried first, except by
 * a batch's retries, which try first the endpoints where its rows have not failed.
 *
 * The writer owns the insert and the refusals it meets. It no longer owns: the endpoints, what the
 * worker saw of each, and their order (endpoints.ts); ending inserts whose answers were lost, and
 * waiting for those a killed worker left running (running-inserts.ts); the queries that read which
 * rows are stored (row-lookup.ts).
 *
 * Every insert has a query id of INSERT_QUERY_ID_PREFIX, so that a partition's next owner can wait
 * for the inserts a killed worker left running on the server before it reads what they stored
 * (offsets/replay-check.ts); with exactly-once, an insert into a Distributed table is synchronous
 * (`insert_distributed_sync=1`): acknowledged once the shards hold the rows, not a local spool.
 *
 * A failed insert is never sent again blindly, to the same endpoint or another: an attempt that may
 * have stored its rows (an answer lost to a timeout or a reset) ends the endpoint loop at once, its
 * error carries the query id of every such attempt, and the flush stage ends those inserts
 * (endInserts) and reads which rows are stored (storedRows) before it sends the rest
 * (delivery/flush/insert-once.ts). Only failures that stored nothing (a refused connection, a
 * refusal of the endpoint's own) go on to the next endpoint at once.
 *
 * Every insert carries max_execution_time, a second under the request timeout. Where the server
 * ends an insert at it (server-version.ts's boundsInsertLife), an endpoint that stops answering
 * holds a lost answer's check only until that bound has passed; the rows are then read on another.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { Readable } from "node:stream";
import { systemClock, type Clock } from "../time/clock.ts";
import { CdrWorkerError } from "../errors.ts";
import { ClickHouseInsertError, classifyInsertError } from "./insert-error.ts";
import { AUTHENTICATION_CODES, saysNothingOfRows } from "./insert-error.ts";
import { renewCredentials } from "./credentials.ts";
import type { UncertainAttempt } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";
import type { DeliveredOffsets, Owned } from "../ownership/delivered.ts";
import { offsetsTable, tableProblems } from "./migrate.ts";
import { boundsInsertLife, insertSettings } from "./server-version.ts";
import { ANSWER_DEADLINE_MARGIN_MS, queryText, readInsertAnswer } from "./answer.ts";
import type { Ping } from "./client.ts";
import { ROWS_ANSWER_BYTES, SMALL_ANSWER_BYTES } from "./answer.ts";
import { Endpoints, type Endpoint, type WorkerRefusal } from "./endpoints.ts";
import { INSERT_END_MARGIN_MS, INSERT_QUERY_ID_PREFIX, RunningInserts } from "./running-inserts.ts";
import { rowLookupQueries, storedRowKeys, type RowLookup } from "./row-lookup.ts";

/** Awaited right before an insert's send; may resolve to the time (monotonic ms) its request ends by. */
export type Admit = () => Promise<number | undefined | void>;

/** Longest the writer trusts its last look at the table's schema after a refused insert. */
const SCHEMA_LOOK_MS = 2_000;

export interface WriterOptions {
  /** Names this worker in its inserts' query ids (WORKER_INSTANCE). */
  instance?: string;
  /**
   * The ClickHouse user the workers insert as: the replay check waits only for that user's inserts,
   * so another user's query with a cdr-worker: id cannot hold the check up.
   */
  user?: string;
  /** Inserts into a Distributed table wait for the shards (exactly-once: the replay check reads them). */
  syncDistributed?: boolean;
  /** CLICKHOUSE_REQUEST_TIMEOUT_MS: the replay check's read is ended by the server before it. */
  requestTimeoutMs?: number;
  /** Time and timers for the waits of the replay check (the delivery simulation's virtual clock). */
  clock?: Clock;
  /**
   * CH_UNREACHABLE_POLICY=wait: a refusal of the worker met by the replay check is tried again, as a
   * ClickHouse that does not answer is, instead of stopping the worker (DECISIONS).
   */
  waitOnRefusal?: boolean;
}

export class ClickHouseWriter {
  readonly #endpoints: Endpoints;
  readonly #running: RunningInserts;
  readonly #table: string;
  readonly #database: string;
  readonly #tableName: string;
  /** Each endpoint's last schema look after a refused insert: when (monotonic ms), and what it found. */
  readonly #schemaSeen = new Map<Endpoint, { at: number; problems: Promise<string[]> }>();
  readonly #offsetsTable: string;
  readonly #insertQuery: string;
  readonly #queryIdPrefix: string;
  readonly #syncDistributed: boolean;
  /**
   * The max_execution_time of the replay check's reads and of every insert: a second under the
   * request timeout, at least one, so the server ends either before the client gives up on it.
   */
  readonly #checkSeconds: number;
  readonly #clock: Clock;
  /**
   * The deadline of every request, answer read included: CLICKHOUSE_REQUEST_TIMEOUT_MS and a margin
   * (answer.ts). The client's own timeout counts the socket's idle time only.
   */
  readonly #deadlineMs: number;
  #inserts = 0;
  #failing = false;
  /** The last refusal of the worker while inserts fail; null once an endpoint takes one again. */
  #refusal: WorkerRefusal | null = null;
  readonly #waitOnRefusal: boolean;
  /** The replay check's last refusal of the worker, until the check is answered (#checkAnswered). */
  #checkRefusal: WorkerRefusal | null = null;

  constructor(
    ch: ClickHouseClient | ReadonlyArray<{ name: string; client: ClickHouseClient; ping?: Ping }>,
    database: string,
    table: string,
    opts: WriterOptions = {},
  ) {
    // The start time and a random part too: a worker restarted under the same WORKER_INSTANCE must
    // not reuse the id of an insert its killed predecessor left running (the server refuses a
    // running id), and nobody else can guess the ids this process will use.
    const random = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex");
    this.#queryIdPrefix = `${INSERT_QUERY_ID_PREFIX}${opts.instance ?? "worker"}:${Date.now().toString(36)}:${random}:`;
    this.#clock = opts.clock ?? systemClock;
    this.#syncDistributed = opts.syncDistributed ?? false;
    this.#waitOnRefusal = opts.waitOnRefusal ?? false;
    this.#checkSeconds = Math.max(1, Math.floor((opts.requestTimeoutMs ?? 10_000) / 1000) - 1);
    this.#deadlineMs = (opts.requestTimeoutMs ?? 10_000) + ANSWER_DEADLINE_MARGIN_MS;
    const list = Array.isArray(ch) ? ch : [{ name: "clickhouse", client: ch as ClickHouseClient }];
    this.#endpoints = new Endpoints(list, this.#clock, this.#deadlineMs);
    const running = { syncDistributed: this.#syncDistributed, user: opts.user };
    this.#running = new RunningInserts(this.#endpoints, this.#clock, running);
    this.#table = `${database}.${table}`;
    this.#database = database;
    this.#tableName = table;
    this.#offsetsTable = `${database}.${offsetsTable(table)}`;
    this.#insertQuery = `INSERT INTO ${this.#table} (${COLUMNS.join(", ")}) FORMAT RowBinary`;
  }

  /** Each endpoint's health, version and counts, for stats. */
  get endpoints(): readonly Endpoint[] {
    return this.#endpoints.list;
  }

  /**
   * ClickHouse's health as the worker sees it, the one source readiness and stats read:
   * `reachable`, an endpoint took the last insert or ping sent to it; `inserting`, false from an
   * insert no endpoint took (it is being retried, or waited for) until one takes an insert again.
   * A refused row or a split is the data's doing, not ClickHouse's: it changes neither. `refusal`:
   * the last refusal of the worker (its credentials, grants, table) while inserts fail, for /readyz.
   */
  get health(): { reachable: boolean; inserting: boolean; refusal: WorkerRefusal | null } {
    return {
      reachable: this.#endpoints.list.some((e) => e.up),
      inserting: !this.#failing && this.#checkRefusal === null,
      refusal: (this.#failing ? this.#refusal : null) ?? this.#checkRefusal,
    };
  }

  /**
   * Resolves once ClickHouse acknowledged every row of `body` (RowBinary rows); throws a
   * ClickHouseInsertError that says whether a resend, a split or neither can help. `admit` is
   * awaited right before each send, on every endpoint, and may throw to stop there (the partitions
   * were lost); it may resolve to a time (the clock's monotonic ms) at which the request is ended,
   * answered or not (the membership lease's end). `failedEndpoints` names the endpoints where earlier
   * attempts of the same rows failed: they are tried after every other.
   */
  async insert(
    body: Uint8Array | string,
    rows: number,
    admit?: Admit,
    failedEndpoints?: ReadonlySet<number>,
  ): Promise<void> {
    const n = this.#endpoints.size;
    let transient: ClickHouseInsertError | undefined;
    let refused: ClickHouseInsertError | undefined;
    let answered = false;
    // Every attempt that may have stored the rows, on whichever endpoint: the caller must know them all.
    const uncertain: UncertainAttempt[] = [];
    // Taken once the request has failed, so once its socket is closed: no byte of it can reach the
    // server later, and a server that bounds an insert's life has ended it by then.
    const attempt = (i: number, queryId: string, version: string | null): UncertainAttempt => {
      const failedAt = this.#clock.mono();
      return version !== null && boundsInsertLife(version)
        ? { endpoint: i, queryId, failedAt, endedBy: failedAt + this.#checkSeconds * 1000 + INSERT_END_MARGIN_MS }
        : { endpoint: i, queryId, failedAt };
    };
    const withAttempts = (e: ClickHouseInsertError) => ((e.attempts = uncertain), e);
    const order = this.#endpoints.order(failedEndpoints);
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      const e = this.#endpoints.list[i]!;
      const queryId = `${this.#queryIdPrefix}${++this.#inserts}`;
      // The version this attempt was sent under: a concurrent insert's failure can forget e.version meanwhile.
      const sent = { version: null as string | null };
      try {
        await this.#insertInto(e, body, rows, queryId, sent, admit);
        e.up = true;
        e.refusing = null;
        e.inserts++;
        this.#endpoints.current = i;
        this.#failing = false;
        this.#refusal = null;
        return;
      } catch (err) {
        // Not ClickHouse's answer (admit refused: the partitions were lost): nothing more is sent.
        if (!(err instanceof ClickHouseInsertError)) throw err;
        const failure = err;
        const version = sent.version;
        if (failure.kind === "configuration") this.#refusal = this.#refusedBy(e, failure);
        if (failure.kind === "data" || failure.kind === "shape") {
          if (failure.mayHaveStored) uncertain.push(attempt(i, queryId, version));
          throw withAttempts(failure);
        }
        if (failure.mayHaveStored) {
          // The rows may be stored here: sent on to the next endpoint they could be stored twice (two
          // entry points of one table). The caller ends this insert and reads what it stored first.
          uncertain.push(attempt(i, queryId, version));
          e.failures++;
          if (failure.kind === "transient") {
            e.up = false;
            e.version = null;
          }
          this.#failing = true;
          // Later inserts, and this one once checked, go to the next endpoint first, unless another
          // insert has meanwhile moved the cursor to one this insert did not try. A concurrent
          // failure elsewhere must not move it back onto an endpoint this one found failing: its
          // next attempt would go there again while a sound endpoint waits untried.
          if (order.indexOf(this.#endpoints.current) <= k) this.#endpoints.current = (i + 1) % n;
          throw withAttempts(
            new ClickHouseInsertError(
              failure.message,
              failure.kind,
              { code: failure.serverCode, type: failure.serverType },
              {
                cause: failure.cause,
                unreachable: !answered && saysNothingOfRows(failure) && k === n - 1,
                mayHaveStored: true,
              },
            ),
          );
        }
        e.failures++;
        if (!saysNothingOfRows(failure)) answered = true;
        if (failure.kind === "condition") {
          transient = failure;
        } else if (failure.kind === "transient") {
          e.up = false;
          e.version = null;
          transient = failure;
        } else {
          refused ??= failure;
        }
      }
    }
    // An endpoint that did not answer may take the batch later; one that refused the worker may too,
    // once the operator's change is undone: both say nothing of the rows.
    this.#failing = true;
    const last = (transient ?? refused)!;
    if (answered) throw withAttempts(last);
    throw withAttempts(
      new ClickHouseInsertError(last.message, last.kind, { code: last.serverCode, type: last.serverType }, {
        cause: last.cause,
        unreachable: true,
        mayHaveStored: uncertain.length > 0,
      }),
    );
  }

  async #insertInto(
    e: Endpoint,
    body: Uint8Array | string,
    rows: number,
    queryId: string,
    sent: { version: string | null },
    admit?: Admit,
  ): Promise<void> {
    const what = `insert of ${rows} rows into ${this.#table}${this.#endpoints.size > 1 ? ` at ${e.name}` : ""}`;
    const version = e.version ?? (await this.#endpoints.learnVersion(e, what));
    // Asked right before the body goes, after any wait for the version: a freeze can fall anywhere before.
    let endBy = (await admit?.()) ?? undefined;
    // A freeze after the admission can outlast the lease it gave: admitted again, never sent past it.
    while (endBy !== undefined && endBy <= this.#clock.mono()) endBy = (await admit!()) ?? undefined;
    sent.version = version;
    try {
      await this.#send(e.client, body, version, queryId, endBy);
    } catch (cause) {
      throw await this.#orTableChanged(e, classifyInsertError(cause, what));
    }
  }

  /**
   * A refusal the server gave as the rows' (data, shape, or a code this worker does not know) is a
   * refusal of the worker when the table no longer fits its binary rows: a column retyped, renamed or
   * dropped under it reads the body another way (18.16 answers CANNOT_READ_ALL_DATA, or a value it
   * cannot parse). The table is looked at, at most once every SCHEMA_LOOK_MS an endpoint; a look
   * that fails leaves the refusal as it came.
   */
  async #orTableChanged(e: Endpoint, failure: ClickHouseInsertError): Promise<ClickHouseInsertError> {
    if (failure.serverCode === null || failure.kind === "configuration" || failure.kind === "condition") return failure;
    const now = this.#clock.mono();
    let seen = this.#schemaSeen.get(e);
    if (!seen || now - seen.at >= SCHEMA_LOOK_MS) {
      const problems = tableProblems(e.client, this.#database, this.#tableName).catch(() => []);
      this.#schemaSeen.set(e, (seen = { at: now, problems }));
    }
    const problems = await seen.problems;
    if (problems.length === 0) return failure;
    const changed = new ClickHouseInsertError(
      `${failure.message} (the table changed under the worker: ${problems.join("; ")})`,
      "configuration",
      { code: failure.serverCode, type: failure.serverType },
      { cause: failure.cause },
    );
    return changed;
  }

  /**
   * Ends the inserts of these attempts, whose answers were lost, and waits until none runs
   * (running-inserts.ts): the flush stage then reads which rows they stored.
   */
  endInserts(attempts: readonly UncertainAttempt[]): Promise<void> {
    return this.#running.end(attempts);
  }

  /** Resolves once every worker insert that runs now on an endpoint that answers has ended (running-inserts.ts). */
  insertsEnded(): Promise<void> {
    const refusals = {
      refusedBy: (e: Endpoint, failure: ClickHouseInsertError) => void this.#refusedBy(e, failure),
      refusalOr: (err: unknown, what: string, e: Endpoint) => this.#refusalOr(err, what, e),
    };
    return this.#running.allEnded(refusals);
  }

  /** Pings every endpoint (and records which answer, and the version of one newly back); true when one does. */
  ping(): Promise<boolean> {
    return this.#endpoints.ping();
  }

  /**
   * Which of the rows `lookup` names are stored, as storedRowKey()s: asked of the endpoints in turn,
   * `first` first when it answered last (the one that took the insert: a replica holds its own rows
   * before the others fetch them), until one answers; throws when none does, or when an answer has a line that does
   * not parse (ClickHouse can append an exception to a 200 answer it already began). Each read is
   * ended by the server (max_execution_time) before the client gives up on it.
   */
  async storedRows(lookup: RowLookup, first?: number): Promise<Set<string>> {
    const out = new Set<string>();
    for (const query of rowLookupQueries(this.#table, lookup)) {
      const settings = { max_execution_time: this.#checkSeconds };
      const from = first !== undefined && this.#endpoints.list[first]?.up ? first : this.#endpoints.current;
      const read = (c: ClickHouseClient) => queryText(c, query, ROWS_ANSWER_BYTES, this.#endpoints.bounded(settings));
      const text = await this.#endpoints.onAny(read, from).catch((err) => {
        // A refusal of the worker holds the batch as an insert's would: readiness names it.
        const c = classifyInsertError(err, "reading which rows are stored");
        if (c.kind === "configuration") {
          this.#failing = true;
          this.#refusal = this.#refusedBy(this.#endpoints.list[from]!, c);
        }
        throw err;
      });
      storedRowKeys(text, out);
    }
    return out;
  }

  /**
   * Sent with `exec`, the whole answer read here: on a refusal the client's own error would keep
   * only the last line of a current server's text, without the row and column (insert-error.ts).
   */
  async #send(
    client: ClickHouseClient,
    body: Uint8Array | string,
    version: string,
    queryId: string,
    endBy?: number,
  ): Promise<void> {
    // Aborting destroys the socket: whatever of the request has not left by then never will.
    const abort = new AbortController();
    const cancel =
      endBy === undefined ? () => {} : this.#clock.setTimeout(() => abort.abort(), endBy - this.#clock.mono());
    // One deadline for the whole request: an endpoint that trickles its answer cannot hold a flush
    // slot, and the partition's commits, past it.
    const deadline = this.#clock.setTimeout(() => abort.abort(), this.#deadlineMs);
    try {
      await this.#exec(client, body, version, queryId, abort.signal);
    } finally {
      cancel();
      deadline();
    }
  }

  async #exec(
    client: ClickHouseClient,
    body: Uint8Array | string,
    version: string,
    queryId: string,
    signal: AbortSignal,
  ): Promise<void> {
    const r = await client.exec({
      abort_signal: signal,
      query: this.#insertQuery,
      values: Readable.from(
        [typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)],
        { objectMode: false },
      ),
      query_id: queryId,
      // max_execution_time bounds the insert's life where the server applies it to inserts (endInserts).
      clickhouse_settings: {
        ...insertSettings(version),
        max_execution_time: this.#checkSeconds,
        ...(this.#syncDistributed ? { insert_distributed_sync: 1 } : {}),
      },
      ignore_error_response: true,
    });
    await readInsertAnswer(r, signal);
  }

  /**
   * Offsets of these partitions stored at or past each one's offset (and below its end, where the
   * check read one), ingested since its time: what a partition's last owner already stored (the
   * replay check). Read from the offsets table, one
   * key range per partition (sql/001_cdr.sql), so its cost follows the rows past the commit, not the
   * table. The server ends it (max_execution_time) a second before the client's request timeout, so
   * a slow check never leaves a read running behind a retry. Asked of the endpoints in turn until one
   * answers; throws when none does.
   */
  async storedOffsets(owned: readonly Owned[]): Promise<DeliveredOffsets> {
    // ingested_at is whole seconds taken for a poll before its records' holds are stamped (a pause
    // can fall between): a minute back. The bound only keeps rows of an older incarnation out.
    const since = (o: Owned) => Math.max(0, Math.floor(o.since / 1000) - 60);
    const where = owned
      .map(
        (o) =>
          `(kafka_partition = ${o.partition} AND kafka_offset >= ${o.from} ` +
          (o.to === undefined ? "" : `AND kafka_offset < ${o.to} `) +
          `AND ingested_at >= toDateTime(${since(o)}))`,
      )
      .join(" OR ");
    const query = `SELECT kafka_partition, kafka_offset FROM ${this.#offsetsTable} WHERE ${where || "0"}`;
    const settings = { max_execution_time: this.#checkSeconds };
    const read = (c: ClickHouseClient) => queryText(c, query, ROWS_ANSWER_BYTES, this.#endpoints.bounded(settings));
    const text = await this.#endpoints.onAny(read).catch((err) => {
      throw this.#refusalOr(err, "replay check: reading what the last owner stored");
    });
    this.#checkAnswered();
    const byPartition = new Map(owned.map((o) => [o.partition, o]));
    const out: DeliveredOffsets = new Map();
    for (const line of text.split("\n")) {
      if (!line) continue;
      // ClickHouse can append an exception to an answer it began with 200: a line that is not a row
      // means the answer is not whole, and a partial answer would skip too little.
      const m = /^(-?\d+)\t(-?\d+)$/.exec(line);
      if (!m) throw new Error(`replay check: an answer line that is not a row: ${line.slice(0, 200)}`);
      const [p, o] = [Number(m[1]), Number(m[2])];
      const w = byPartition.get(p);
      if (!w || o < w.from) continue;
      let list = out.get(p);
      if (!list) out.set(p, (list = []));
      list.push(o);
    }
    return out;
  }

  /**
   * The partitions whose offsets table holds an offset in [from, to), with no time bound: one point
   * read each, which stops at the first row (LIMIT 1). For partitions with no commit to start from
   * (offsets/replay-check.ts).
   */
  async anyStored(ranges: ReadonlyArray<{ partition: number; from: number; to: number }>): Promise<Set<number>> {
    const out = new Set<number>();
    const settings = { max_execution_time: this.#checkSeconds };
    for (const r of ranges) {
      const query =
        `SELECT 1 FROM ${this.#offsetsTable} WHERE kafka_partition = ${r.partition} ` +
        `AND kafka_offset >= ${r.from} AND kafka_offset < ${r.to} LIMIT 1`;
      const read = (c: ClickHouseClient) => queryText(c, query, SMALL_ANSWER_BYTES, this.#endpoints.bounded(settings));
      const text = await this.#endpoints.onAny(read).catch((err) => {
        throw this.#refusalOr(err, "replay check: reading whether a partition's records are stored");
      });
      if (text.trim() === "1") out.add(r.partition);
    }
    return out;
  }

  /**
   * The replay check was answered: a refusal it met (#refusalOr) is over. Inserts' own refusals end
   * with the next insert taken; an idle worker would otherwise say the last one for ever.
   */
  #checkAnswered(): void {
    this.#checkRefusal = null;
  }

  /** Records a refusal of the worker for /readyz; one of its credentials has the password file read again. */
  #refusedBy(e: Endpoint, failure: ClickHouseInsertError): WorkerRefusal {
    e.refusing = { code: failure.serverCode, type: failure.serverType };
    if (AUTHENTICATION_CODES.has(failure.serverCode ?? -1)) renewCredentials(e.client);
    return { endpoint: e.name, code: failure.serverCode, type: failure.serverType };
  }

  /**
   * A refusal of the worker met by the replay check (a grant missing, the table gone, its password
   * rotated): under CH_UNREACHABLE_POLICY=wait it is tried again like a ClickHouse that does not
   * answer, and /readyz names it; otherwise it stops the worker with a line naming it, as at start.
   * Anything else as it came, to be tried again.
   */
  #refusalOr(err: unknown, what: string, at?: Endpoint): unknown {
    const e = classifyInsertError(err, what);
    if (e.kind !== "configuration") return err;
    const endpoint = at ?? this.#endpoints.list[this.#endpoints.current]!;
    const refusal = this.#refusedBy(endpoint, e);
    if (this.#waitOnRefusal) {
      this.#checkRefusal = refusal;
      return e;
    }
    return new CdrWorkerError("CLICKHOUSE_SCHEMA", e.message, false, { cause: err });
  }
}
