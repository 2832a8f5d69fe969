/**
 * Inserts a batch of rows already encoded as RowBinary (row-binary.ts): one HTTP request,
 * acknowledged or thrown. With several endpoints (CLICKHOUSE_URL=a,b,…: replicas of one shard, or
 * load balancers in front of them) an insert that one endpoint cannot take goes to the next at
 * once: transient failures (it does not answer) and refusals of the worker that belong to that
 * endpoint (authentication, readonly, a missing table or database). Only when every endpoint failed does it
 * count as one attempt against the retry budget. A data or shape error is the same on every
 * endpoint and is thrown at once. The endpoint that last took an insert is tried first, except by
 * a batch's retries, which try first the endpoints where its rows have not failed (#order).
 *
 * Each endpoint's version is learned on first contact (SELECT version()), logged, and decides the
 * settings its inserts carry (server-version.ts); an endpoint that stopped answering is asked
 * again when it is back, since it may have been upgraded meanwhile.
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
import type { ClickHouseClient, ClickHouseSettings } from "@clickhouse/client";
import { Readable } from "node:stream";
import { systemClock, type Clock } from "../time/clock.ts";
import { CdrWorkerError } from "../errors.ts";
import { log } from "../log.ts";
import { ClickHouseInsertError, classifyInsertError, HeldCheckError, refusal } from "./insert-error.ts";
import { AUTHENTICATION_CODES, saysNothingOfRows } from "./insert-error.ts";
import { renewCredentials } from "./credentials.ts";
import type { UncertainAttempt } from "./insert-error.ts";
import { COLUMNS } from "./row-format.ts";
import type { DeliveredOffsets, Owned } from "../ownership/delivered.ts";
import { offsetsTable, tableProblems } from "./migrate.ts";
import { boundsInsertLife, insertSettings, OLDEST_TESTED, olderThanTested } from "./server-version.ts";
import { ANSWER_DEADLINE_MARGIN_MS, queryText, readCapped, versionOf, withDeadline } from "./answer.ts";
import type { AnswerOptions } from "./answer.ts";
import type { Ping } from "./client.ts";
import { LIST_ANSWER_BYTES, ROWS_ANSWER_BYTES, SMALL_ANSWER_BYTES } from "./answer.ts";

/** Awaited right before an insert's send; may resolve to the time (monotonic ms) its request ends by. */
export type Admit = () => Promise<number | undefined | void>;

/** The start of every insert's query id (system.processes). */
export const INSERT_QUERY_ID_PREFIX = "cdr-worker:";
/** How often the replay check looks whether earlier inserts still run, and how long it waits in all. */
/**
 * An exception as each supported server writes it: `Code: 241. DB::Exception:`, or 18.16's
 * `Code: 241, e.displayText() =`.
 */
const EXCEPTION_TEXT = /\bCode: \d+[.,] (?:e\.displayText\(\) = )?DB::Exception\b/;
const RUNNING_POLL_MS = 100;
const RUNNING_WAIT_MS = 120_000;
/** ClickHouse's CANNOT_KILL: 18.16 cannot stop a synchronous Distributed insert; it is awaited. */
const CANNOT_KILL = 380;
/**
 * How long past its max_execution_time an insert whose answer was lost may still run on a server
 * that bounds it: the limit is checked between the steps of the insert's pipeline, not at an
 * instant, and the request's last bytes can still be on their way when the worker closes its
 * socket. Past it, an endpoint that does not answer holds no check (endInserts).
 */
export const INSERT_END_MARGIN_MS = 2_000;
/**
 * How long an endpoint that took an insert whose answer was lost, and has no bound on an insert's
 * life, may hold its check while another endpoint answers: a replica restarted by its service
 * manager (up to 30 s to stop, then its tables to load) is back well within it.
 */
export const SILENT_ENDPOINT_HOLD_MS = 120_000;
/** Longest the writer trusts its last look at the table's schema after a refused insert. */
const SCHEMA_LOOK_MS = 2_000;

/**
 * Where a batch's rows are looked up: their provenance, at the sorting key's own points. A row is
 * found by its session_start_time second (the key's first column), so the read costs the rows the
 * table holds in the batch's seconds, however far apart those seconds lie (epoch 0 beside now), and
 * never the span between them. Its cdr_id must match too: a row an older life of the topic stored
 * at the same partition and offset is another record, unless it is the same one.
 */
export interface RowLookup {
  partitions: readonly number[];
  minOffset: number;
  maxOffset: number;
  /** The rows' session_start_time values (s), each once. */
  starts: readonly number[];
}

/** A stored row as a lookup names it: `partition:offset:cdr_id:session_start_time`. */
export function storedRowKey(partition: number, offset: number, cdrId: string, start: number): string {
  return `${partition}:${offset}:${cdrId}:${start}`;
}

/** Runs of consecutive seconds one lookup query names at most: the query's text stays small. */
const RUNS_PER_READ = 256;

/** The distinct seconds as runs [first, last] of consecutive seconds, ascending. */
export function secondRuns(starts: readonly number[]): Array<[number, number]> {
  const sorted = [...new Set(starts)].sort((a, b) => a - b);
  const runs: Array<[number, number]> = [];
  for (const s of sorted) {
    const last = runs[runs.length - 1];
    if (last && s === last[1] + 1) last[1] = s;
    else runs.push([s, s]);
  }
  return runs;
}

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

/** A refusal of the worker (insert-error.ts "configuration"): where, and what the server said. */
export interface WorkerRefusal {
  /** host:port, never the credentials. */
  endpoint: string;
  code: number | null;
  type: string | null;
}

/** One ClickHouse endpoint and what the worker saw of it (docs/stats.md). */
export interface Endpoint {
  /** host:port, never the credentials. */
  readonly name: string;
  readonly client: ClickHouseClient;
  /** `/ping` with its answer bounded (client.ts pingOf); the client's own ping where absent. */
  readonly ping?: Ping;
  up: boolean;
  inserts: number;
  failures: number;
  /** `SELECT version()` of the server behind it, once it answered. */
  version: string | null;
  /** Its last refusal of the worker (insert-error.ts "configuration"), until it takes an insert again. */
  refusing: { code: number | null; type: string | null } | null;
}

export class ClickHouseWriter {
  readonly #endpoints: Endpoint[];
  readonly #table: string;
  readonly #database: string;
  readonly #tableName: string;
  /** Each endpoint's last schema look after a refused insert: when (monotonic ms), and what it found. */
  readonly #schemaSeen = new Map<Endpoint, { at: number; problems: Promise<string[]> }>();
  readonly #offsetsTable: string;
  readonly #insertQuery: string;
  readonly #queryIdPrefix: string;
  readonly #syncDistributed: boolean;
  readonly #user: string | undefined;
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
  #current = 0;
  #inserts = 0;
  #failing = false;
  /** The last refusal of the worker while inserts fail; null once an endpoint takes one again. */
  #refusal: WorkerRefusal | null = null;
  readonly #waitOnRefusal: boolean;
  /** The replay check's last refusal of the worker, until the check is answered (#checkAnswered). */
  #checkRefusal: WorkerRefusal | null = null;
  /** Attempts whose held check was said in the log: once an attempt, not at every retry. */
  readonly #heldSaid = new WeakSet<UncertainAttempt>();

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
    this.#user = opts.user;
    this.#clock = opts.clock ?? systemClock;
    this.#syncDistributed = opts.syncDistributed ?? false;
    this.#waitOnRefusal = opts.waitOnRefusal ?? false;
    this.#checkSeconds = Math.max(1, Math.floor((opts.requestTimeoutMs ?? 10_000) / 1000) - 1);
    this.#deadlineMs = (opts.requestTimeoutMs ?? 10_000) + ANSWER_DEADLINE_MARGIN_MS;
    const list = Array.isArray(ch) ? ch : [{ name: "clickhouse", client: ch as ClickHouseClient }];
    this.#endpoints = list.map(({ name, client, ping }) => ({
      name,
      client,
      ...(ping ? { ping } : {}),
      up: true,
      inserts: 0,
      failures: 0,
      version: null,
      refusing: null,
    }));
    this.#table = `${database}.${table}`;
    this.#database = database;
    this.#tableName = table;
    this.#offsetsTable = `${database}.${offsetsTable(table)}`;
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
   * A refused row or a split is the data's doing, not ClickHouse's: it changes neither. `refusal`:
   * the last refusal of the worker (its credentials, grants, table) while inserts fail, for /readyz.
   */
  get health(): { reachable: boolean; inserting: boolean; refusal: WorkerRefusal | null } {
    return {
      reachable: this.#endpoints.some((e) => e.up),
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
    const n = this.#endpoints.length;
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
    const order = this.#order(failedEndpoints);
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      const e = this.#endpoints[i]!;
      const queryId = `${this.#queryIdPrefix}${++this.#inserts}`;
      // The version this attempt was sent under: a concurrent insert's failure can forget e.version meanwhile.
      const sent = { version: null as string | null };
      try {
        await this.#insertInto(e, body, rows, queryId, sent, admit);
        e.up = true;
        e.refusing = null;
        e.inserts++;
        this.#current = i;
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
          if (order.indexOf(this.#current) <= k) this.#current = (i + 1) % n;
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

  /**
   * The endpoints in the order an insert tries them: from the cursor on (the endpoint that last
   * took an insert, or the one after the last to fail), those its rows already failed at last. The
   * cursor is a hint shared by every insert in flight: another's success can point it back at an
   * endpoint where these rows just failed (a slow one), and their retries, going there again, would
   * spend the budget while an endpoint they never tried waits. Read once, so that this insert's
   * order does not follow the moves of others.
   */
  #order(failed?: ReadonlySet<number>): number[] {
    const n = this.#endpoints.length, start = this.#current;
    const all = Array.from({ length: n }, (_, k) => (start + k) % n);
    return failed?.size ? [...all.filter((i) => !failed.has(i)), ...all.filter((i) => failed.has(i))] : all;
  }

  async #insertInto(
    e: Endpoint,
    body: Uint8Array | string,
    rows: number,
    queryId: string,
    sent: { version: string | null },
    admit?: Admit,
  ): Promise<void> {
    const what = `insert of ${rows} rows into ${this.#table}${this.#endpoints.length > 1 ? ` at ${e.name}` : ""}`;
    const version = e.version ?? (await this.#learnVersion(e, what));
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
   * Ends the inserts of these attempts on the endpoints they went to (`KILL QUERY … SYNC`: one still
   * running could store after the rows were read) and waits until none runs any more. Through a
   * Distributed table each shard's part runs as a query of its own, with the attempt's id as
   * `initial_query_id`, on whichever replica took it: those are ended and awaited on every endpoint
   * that answers. 18.16 refuses to kill such an insert (CANNOT_KILL: its stages cannot be stopped);
   * it ends by itself once the block sent is written, and is awaited. An endpoint that does not
   * answer holds the check only while one of its inserts may still run: on a server that bounds an
   * insert's life each has ended by its `endedBy`, so this waits until then, and the rows are then
   * read on another endpoint. Elsewhere, while another endpoint answers, it throws a HeldCheckError
   * for SILENT_ENDPOINT_HOLD_MS after the failure: the check waits for that endpoint without
   * spending the retry budget. Throws the endpoint's own error otherwise.
   */
  async endInserts(attempts: readonly UncertainAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    const byEndpoint = new Map<number, UncertainAttempt[]>();
    for (const a of attempts) byEndpoint.set(a.endpoint, [...(byEndpoint.get(a.endpoint) ?? []), a]);
    await Promise.all(
      [...byEndpoint].map(async ([i, list]) => {
        const e = this.#endpoints[i]!;
        try {
          await this.#endOn(e, list.map((a) => a.queryId));
        } catch (err) {
          const silent = classifyInsertError(err, "").serverCode === null;
          const until = Math.max(...list.map((a) => a.endedBy ?? Infinity));
          if (!silent) throw err;
          if (until === Infinity) throw await this.#held(i, list, err);
          // Bounded: at most the insert's life and the margin past the failure.
          const wait = until - this.#clock.mono();
          const msg = "an endpoint that does not answer held inserts whose answers were lost; read elsewhere once over";
          log.warn(msg, {
            endpoint: e.name,
            inserts: list.length,
            wait_ms: Math.max(0, Math.round(wait)),
            err: err as Error,
          });
          if (wait > 0) await this.#clock.sleep(wait);
          return;
        }
        e.up = true;
      }),
    );
    if (!this.#syncDistributed || this.#endpoints.length < 2) return;
    // A shard's part may run on another replica the worker writes to: ended there too. One that
    // failed its last request or does not answer now is not waited for: a part there is the
    // replication's to carry, as any write there.
    const ids = attempts.map((a) => a.queryId);
    await Promise.all(
      this.#endpoints.map(async (e, i) => {
        if (byEndpoint.has(i) || !e.up) return;
        await this.#endOn(e, ids, true).catch((err: unknown) => {
          if (classifyInsertError(err, "").serverCode !== null) throw err;
        });
      }),
    );
  }

  /** KILL … SYNC of these inserts and their shards' parts on one endpoint, then waits till none runs. */
  async #endOn(e: Endpoint, ids: readonly string[], partsOnly = false): Promise<void> {
    const list = ids.map(quote).join(", ");
    const parts = `initial_query_id IN (${list})`;
    const which = partsOnly ? parts : `(query_id IN (${list}) OR ${parts})`;
    const kill = `KILL QUERY WHERE ${which} SYNC`;
    await queryText(e.client, kill, LIST_ANSWER_BYTES, this.#bounded()).catch((err: unknown) => {
      if (classifyInsertError(err, "").serverCode !== CANNOT_KILL) throw err;
    });
    const query = `SELECT count() FROM system.processes WHERE ${which}`;
    const deadline = this.#clock.mono() + RUNNING_WAIT_MS;
    for (;;) {
      const running = Number((await queryText(e.client, query, SMALL_ANSWER_BYTES, this.#bounded())).trim());
      if (running === 0) return;
      if (this.#clock.mono() > deadline)
        throw new Error(`${running} inserts still run at ${e.name} ${RUNNING_WAIT_MS / 1000} s after their KILL`);
      await this.#clock.sleep(RUNNING_POLL_MS);
    }
  }

  /**
   * The error a silent endpoint's check throws: a HeldCheckError while another endpoint answers and
   * the oldest failure is younger than SILENT_ENDPOINT_HOLD_MS (said once an attempt), else `err`.
   */
  async #held(i: number, list: readonly UncertainAttempt[], err: unknown): Promise<unknown> {
    const now = this.#clock.mono();
    const until = Math.min(...list.map((a) => a.failedAt ?? now)) + SILENT_ENDPOINT_HOLD_MS;
    if (now >= until) return err;
    const others = this.#endpoints.filter((_, k) => k !== i);
    const answers = await Promise.all(others.map((o) => this.#answersPing(o).catch(() => false)));
    if (!answers.includes(true)) return err;
    const e = this.#endpoints[i]!;
    if (!list.every((a) => this.#heldSaid.has(a))) {
      for (const a of list) this.#heldSaid.add(a);
      log.warn("a lost answer's check waits for the endpoint that took the insert; the others answer", {
        endpoint: e.name,
        inserts: list.length,
        wait_at_most_ms: Math.round(until - now),
        err: err as Error,
      });
    }
    return new HeldCheckError(e.name, until, err);
  }

  /**
   * Which of the rows `lookup` names are stored, as storedRowKey()s: asked of the endpoints in turn,
   * `first` first when it answered last (the one that took the insert: a replica holds its own rows
   * before the others fetch them), until one answers; throws when none does, or when an answer has a line that does
   * not parse (ClickHouse can append an exception to a 200 answer it already began). Each read is
   * ended by the server (max_execution_time) before the client gives up on it.
   */
  async storedRows(lookup: RowLookup, first?: number): Promise<Set<string>> {
    const runs = secondRuns(lookup.starts);
    const out = new Set<string>();
    for (let i = 0; i < runs.length; i += RUNS_PER_READ) {
      const seconds = runs
        .slice(i, i + RUNS_PER_READ)
        .map(([a, b]) =>
          a === b
            ? `session_start_time = toDateTime(${a})`
            : `(session_start_time >= toDateTime(${a}) AND session_start_time <= toDateTime(${b}))`,
        )
        .join(" OR ");
      const query =
        `SELECT kafka_partition, kafka_offset, toString(cdr_id), toUInt32(session_start_time) FROM ${this.#table} ` +
        `WHERE (${seconds}) AND kafka_partition IN (${lookup.partitions.join(", ")}) ` +
        `AND kafka_offset >= ${lookup.minOffset} AND kafka_offset <= ${lookup.maxOffset}`;
      const settings = { max_execution_time: this.#checkSeconds };
      const from = first !== undefined && this.#endpoints[first]?.up ? first : this.#current;
      const read = (c: ClickHouseClient) => queryText(c, query, ROWS_ANSWER_BYTES, this.#bounded(settings));
      const text = await this.#onAnyEndpoint(read, from).catch((err) => {
        // A refusal of the worker holds the batch as an insert's would: readiness names it.
        const c = classifyInsertError(err, "reading which rows are stored");
        if (c.kind === "configuration") {
          this.#failing = true;
          this.#refusal = this.#refusedBy(this.#endpoints[from]!, c);
        }
        throw err;
      });
      for (const line of text.split("\n")) {
        if (!line) continue;
        const m = /^(-?\d+)\t(-?\d+)\t([0-9a-f-]{36})\t(\d+)$/.exec(line);
        if (!m)
          throw new Error(`reading which rows are stored: an answer line that is not a row: ${line.slice(0, 200)}`);
        out.add(storedRowKey(Number(m[1]), Number(m[2]), m[3]!, Number(m[4])));
      }
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
    const answer = await readCapped(r.stream, LIST_ANSWER_BYTES, "an insert's answer", signal);
    const status = r.http_status_code ?? 200;
    // Judged whole: a server that sent its headers early (progress headers in a user's profile), or
    // a proxy, writes the exception into a 200 body; an insert's own answer has none.
    if (status >= 300 || r.response_headers["x-clickhouse-exception-code"] !== undefined || EXCEPTION_TEXT.test(answer))
      throw refusal(status, r.response_headers, answer);
  }

  /** Whether the endpoint answers /ping within the writer's deadline (its bounded ping where given). */
  async #answersPing(e: Endpoint): Promise<boolean> {
    const ping =
      e.ping ?? (async (signal: AbortSignal) => (await e.client.ping({ select: false, abort_signal: signal })).success);
    const timer = (fn: () => void, ms: number) => this.#clock.setTimeout(fn, ms);
    return withDeadline(this.#deadlineMs, `ping of ${e.name}`, timer, ping);
  }

  /** Answer options for a query of this writer's: its deadline, on its clock. */
  #bounded(settings?: ClickHouseSettings): AnswerOptions {
    const setTimer = (fn: () => void, ms: number) => this.#clock.setTimeout(fn, ms);
    return { timeoutMs: this.#deadlineMs, setTimer, ...(settings ? { settings } : {}) };
  }

  /** Asks the endpoint its version; a failure is classified like an insert's (it fails over alike). */
  async #learnVersion(e: Endpoint, what: string): Promise<string> {
    try {
      e.version = versionOf(await queryText(e.client, "SELECT version()", SMALL_ANSWER_BYTES, this.#bounded()));
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
    const read = (c: ClickHouseClient) => queryText(c, query, ROWS_ANSWER_BYTES, this.#bounded(settings));
    const text = await this.#onAnyEndpoint(read).catch((err) => {
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
      const read = (c: ClickHouseClient) => queryText(c, query, SMALL_ANSWER_BYTES, this.#bounded(settings));
      const text = await this.#onAnyEndpoint(read).catch((err) => {
        throw this.#refusalOr(err, "replay check: reading whether a partition's records are stored");
      });
      if (text.trim() === "1") out.add(r.partition);
    }
    return out;
  }

  /**
   * Resolves once every worker insert that runs now on any endpoint that answers has ended: an
   * insert whose worker was killed goes on on the server, and must be seen before it is counted.
   */
  async insertsEnded(): Promise<void> {
    const running = async (c: ClickHouseClient, ids?: readonly string[]) => {
      const which =
        // A shard's part of an insert through a Distributed table has its own id: its initial one is the worker's.
        (ids
          ? `query_id IN (${ids.map(quote).join(", ")})`
          : `(query_id LIKE '${INSERT_QUERY_ID_PREFIX}%' OR initial_query_id LIKE '${INSERT_QUERY_ID_PREFIX}%')`) +
        (this.#user === undefined ? "" : ` AND initial_user = ${quote(this.#user)}`);
      const query = `SELECT query_id FROM system.processes WHERE ${which}`;
      const answer = await queryText(c, query, LIST_ANSWER_BYTES, this.#bounded());
      return answer.split("\n").filter(Boolean);
    };
    await Promise.all(
      this.#endpoints.map(async (e) => {
        // An endpoint that does not answer may still run an insert that stores after the check:
        // its error fails the check, which is tried again (a missing grant stops the worker). One
        // that refuses the worker's credentials (its user missing there, or another password) runs
        // none of this user's inserts: it is passed over, as the inserts can go elsewhere.
        let refusedCredentials = false;
        let ids = await running(e.client).catch((err) => {
          const c = classifyInsertError(err, `replay check: asking ${e.name} which inserts still run`);
          if (c.kind === "configuration" && AUTHENTICATION_CODES.has(c.serverCode ?? -1)) {
            refusedCredentials = true;
            this.#refusedBy(e, c);
            return [] as string[];
          }
          throw this.#refusalOr(err, `replay check: asking ${e.name} which inserts still run`, e);
        });
        if (refusedCredentials)
          log.warn("replay check: an endpoint refuses the worker's credentials, so runs none of its inserts", {
            endpoint: e.name,
          });
        else e.refusing = null; // it answered the worker: no refusal of its stands
        const deadline = this.#clock.mono() + RUNNING_WAIT_MS;
        while (ids.length > 0) {
          if (this.#clock.mono() > deadline)
            throw new Error(
              `${ids.length} inserts still run at ${e.name} after ${RUNNING_WAIT_MS / 1000} s: ` +
                ids.slice(0, 3).join(", "),
            );
          await this.#clock.sleep(RUNNING_POLL_MS);
          ids = await running(e.client, ids).catch((err) => {
            throw this.#refusalOr(err, `replay check: asking ${e.name} which inserts still run`, e);
          });
        }
      }),
    );
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
    const endpoint = at ?? this.#endpoints[this.#current]!;
    const refusal = this.#refusedBy(endpoint, e);
    if (this.#waitOnRefusal) {
      this.#checkRefusal = refusal;
      return e;
    }
    return new CdrWorkerError("CLICKHOUSE_SCHEMA", e.message, false, { cause: err });
  }

  async #onAnyEndpoint<T>(fn: (c: ClickHouseClient) => Promise<T>, first = this.#current): Promise<T> {
    let last: unknown;
    for (let k = 0; k < this.#endpoints.length; k++) {
      const e = this.#endpoints[(first + k) % this.#endpoints.length]!;
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
          e.up = await this.#answersPing(e);
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


function quote(s: string): string {
  return `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}
