/**
 * The worker's inserts still running on the server, ended and awaited before rows are read: an
 * insert whose answer was lost (endInserts), and every insert of this user a killed worker left
 * running (allEnded, the replay check's first step: offsets/replay-check.ts). A read taken while
 * one of them runs could miss rows it stores a moment later.
 */
import type { Clock } from "../time/clock.ts";
import { log } from "../log.ts";
import { AUTHENTICATION_CODES, ClickHouseInsertError, classifyInsertError, HeldCheckError } from "./insert-error.ts";
import type { UncertainAttempt } from "./insert-error.ts";
import { LIST_ANSWER_BYTES, queryText, SMALL_ANSWER_BYTES } from "./answer.ts";
import type { Endpoint, Endpoints } from "./endpoints.ts";

/** The start of every insert's query id (system.processes). */
export const INSERT_QUERY_ID_PREFIX = "cdr-worker:";
/** How often the checks look whether inserts still run, and how long they wait in all. */
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

/** What the writer does with a refusal of the worker met here: it records it, for /readyz. */
export interface Refusals {
  /** Records the endpoint's refusal of the worker. */
  refusedBy(e: Endpoint, failure: ClickHouseInsertError): void;
  /** The error to throw for `err` met while doing `what` at `e`: a refusal of the worker as the policy says. */
  refusalOr(err: unknown, what: string, e: Endpoint): unknown;
}

export class RunningInserts {
  readonly #endpoints: Endpoints;
  readonly #clock: Clock;
  /** Inserts into a Distributed table wait for the shards: their parts are ended on every replica. */
  readonly #syncDistributed: boolean;
  /** The user the workers insert as: only its inserts are waited for. */
  readonly #user: string | undefined;
  /** Attempts whose held check was said in the log: once an attempt, not at every retry. */
  readonly #heldSaid = new WeakSet<UncertainAttempt>();

  constructor(endpoints: Endpoints, clock: Clock, opts: { syncDistributed: boolean; user?: string | undefined }) {
    this.#endpoints = endpoints;
    this.#clock = clock;
    this.#syncDistributed = opts.syncDistributed;
    this.#user = opts.user;
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
  async end(attempts: readonly UncertainAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    const byEndpoint = new Map<number, UncertainAttempt[]>();
    for (const a of attempts) byEndpoint.set(a.endpoint, [...(byEndpoint.get(a.endpoint) ?? []), a]);
    await Promise.all(
      [...byEndpoint].map(async ([i, list]) => {
        const e = this.#endpoints.list[i]!;
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
    if (!this.#syncDistributed || this.#endpoints.size < 2) return;
    // A shard's part may run on another replica the worker writes to: ended there too. One that
    // failed its last request or does not answer now is not waited for: a part there is the
    // replication's to carry, as any write there.
    const ids = attempts.map((a) => a.queryId);
    await Promise.all(
      this.#endpoints.list.map(async (e, i) => {
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
    await queryText(e.client, kill, LIST_ANSWER_BYTES, this.#endpoints.bounded()).catch((err: unknown) => {
      if (classifyInsertError(err, "").serverCode !== CANNOT_KILL) throw err;
    });
    const query = `SELECT count() FROM system.processes WHERE ${which}`;
    const deadline = this.#clock.mono() + RUNNING_WAIT_MS;
    for (;;) {
      const answer = await queryText(e.client, query, SMALL_ANSWER_BYTES, this.#endpoints.bounded());
      const running = Number(answer.trim());
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
    const others = this.#endpoints.list.filter((_, k) => k !== i);
    const answers = await Promise.all(others.map((o) => this.#endpoints.answersPing(o).catch(() => false)));
    if (!answers.includes(true)) return err;
    const e = this.#endpoints.list[i]!;
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
   * Resolves once every worker insert that runs now on any endpoint that answers has ended: an
   * insert whose worker was killed goes on on the server, and must be seen before it is counted.
   */
  async allEnded(refusals: Refusals): Promise<void> {
    const running = async (e: Endpoint, ids?: readonly string[]) => {
      const which =
        // A shard's part of an insert through a Distributed table has its own id: its initial one is the worker's.
        (ids
          ? `query_id IN (${ids.map(quote).join(", ")})`
          : `(query_id LIKE '${INSERT_QUERY_ID_PREFIX}%' OR initial_query_id LIKE '${INSERT_QUERY_ID_PREFIX}%')`) +
        (this.#user === undefined ? "" : ` AND initial_user = ${quote(this.#user)}`);
      const query = `SELECT query_id FROM system.processes WHERE ${which}`;
      const answer = await queryText(e.client, query, LIST_ANSWER_BYTES, this.#endpoints.bounded());
      return answer.split("\n").filter(Boolean);
    };
    await Promise.all(
      this.#endpoints.list.map(async (e) => {
        const what = `replay check: asking ${e.name} which inserts still run`;
        // An endpoint that does not answer may still run an insert that stores after the check:
        // its error fails the check, which is tried again (a missing grant stops the worker). One
        // that refuses the worker's credentials (its user missing there, or another password) runs
        // none of this user's inserts: it is passed over, as the inserts can go elsewhere.
        let refusedCredentials = false;
        let ids = await running(e).catch((err) => {
          const c = classifyInsertError(err, what);
          if (c.kind === "configuration" && AUTHENTICATION_CODES.has(c.serverCode ?? -1)) {
            refusedCredentials = true;
            refusals.refusedBy(e, c);
            return [] as string[];
          }
          throw refusals.refusalOr(err, what, e);
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
          ids = await running(e, ids).catch((err) => {
            throw refusals.refusalOr(err, what, e);
          });
        }
      }),
    );
  }
}

function quote(s: string): string {
  return `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}
