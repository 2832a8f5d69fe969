/**
 * The ClickHouse endpoints a writer sends to (CLICKHOUSE_URL=a,b,…: replicas of one shard, or load
 * balancers in front of them), what the worker saw of each, and the order an insert tries them: the
 * endpoint that last took an insert first, those where the batch's rows already failed last.
 *
 * Each endpoint's version is learned on first contact (SELECT version()), logged, and decides the
 * settings its inserts carry (server-version.ts); an endpoint that stopped answering is asked
 * again when it is back, since it may have been upgraded meanwhile.
 */
import type { ClickHouseClient, ClickHouseSettings } from "@clickhouse/client";
import type { Clock } from "../time/clock.ts";
import { log } from "../log.ts";
import { classifyInsertError } from "./insert-error.ts";
import { OLDEST_TESTED, olderThanTested } from "./server-version.ts";
import { queryText, SMALL_ANSWER_BYTES, versionOf, withDeadline, type AnswerOptions } from "./answer.ts";
import type { Ping } from "./client.ts";

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

export class Endpoints {
  readonly list: Endpoint[];
  /**
   * The endpoint that last took an insert, or the one after the last to fail: where the next insert
   * starts, and the first asked by a read.
   */
  current = 0;
  readonly #clock: Clock;
  /** The deadline of every request, answer read included (answer.ts). */
  readonly #deadlineMs: number;

  constructor(
    list: ReadonlyArray<{ name: string; client: ClickHouseClient; ping?: Ping }>,
    clock: Clock,
    deadlineMs: number,
  ) {
    this.list = list.map(({ name, client, ping }) => ({
      name,
      client,
      ...(ping ? { ping } : {}),
      up: true,
      inserts: 0,
      failures: 0,
      version: null,
      refusing: null,
    }));
    this.#clock = clock;
    this.#deadlineMs = deadlineMs;
  }

  get size(): number {
    return this.list.length;
  }

  /**
   * The endpoints in the order an insert tries them: from the cursor on (the endpoint that last
   * took an insert, or the one after the last to fail), those its rows already failed at last. The
   * cursor is a hint shared by every insert in flight: another's success can point it back at an
   * endpoint where these rows just failed (a slow one), and their retries, going there again, would
   * spend the budget while an endpoint they never tried waits. Read once, so that this insert's
   * order does not follow the moves of others.
   */
  order(failed?: ReadonlySet<number>): number[] {
    const n = this.list.length, start = this.current;
    const all = Array.from({ length: n }, (_, k) => (start + k) % n);
    return failed?.size ? [...all.filter((i) => !failed.has(i)), ...all.filter((i) => failed.has(i))] : all;
  }

  /** `fn` asked of the endpoints in turn from `first` until one answers; the last failure when none does. */
  async onAny<T>(fn: (c: ClickHouseClient) => Promise<T>, first = this.current): Promise<T> {
    let last: unknown;
    for (let k = 0; k < this.list.length; k++) {
      const e = this.list[(first + k) % this.list.length]!;
      try {
        return await fn(e.client);
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  /** Answer options for a query: the deadline, on this clock. */
  bounded(settings?: ClickHouseSettings): AnswerOptions {
    const setTimer = (fn: () => void, ms: number) => this.#clock.setTimeout(fn, ms);
    return { timeoutMs: this.#deadlineMs, setTimer, ...(settings ? { settings } : {}) };
  }

  /** Whether the endpoint answers /ping within the deadline (its bounded ping where given). */
  async answersPing(e: Endpoint): Promise<boolean> {
    const ping =
      e.ping ?? (async (signal: AbortSignal) => (await e.client.ping({ select: false, abort_signal: signal })).success);
    const timer = (fn: () => void, ms: number) => this.#clock.setTimeout(fn, ms);
    return withDeadline(this.#deadlineMs, `ping of ${e.name}`, timer, ping);
  }

  /** Asks the endpoint its version; a failure is classified like an insert's (it fails over alike). */
  async learnVersion(e: Endpoint, what: string): Promise<string> {
    try {
      e.version = versionOf(await queryText(e.client, "SELECT version()", SMALL_ANSWER_BYTES, this.bounded()));
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

  /** Pings every endpoint (and records which answer, and the version of one newly back); true when one does. */
  async ping(): Promise<boolean> {
    const answers = await Promise.all(
      this.list.map(async (e) => {
        try {
          e.up = await this.answersPing(e);
        } catch {
          e.up = false;
        }
        if (!e.up) e.version = null;
        else if (e.version === null) await this.learnVersion(e, `ping of ${e.name}`).catch(() => {});
        return e.up;
      }),
    );
    return answers.some(Boolean);
  }
}
