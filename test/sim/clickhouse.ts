/**
 * Simulated ClickHouse for the delivery simulation: one table (and its offsets view's table)
 * behind one or more HTTP endpoints, answering the requests the worker's ClickHouseWriter makes
 * through the parts of @clickhouse/client it uses (exec, query, command, ping), with the answers
 * and errors the real client produces. A request it does not recognise throws: the writer's SQL
 * cannot drift from what this server understands without the simulation saying so.
 *
 * What it keeps of the real server, because the invariants depend on it:
 * - an insert runs for a while as a process (system.processes, its query id and user) and stores its
 *   rows at its end, unless KILL QUERY ended it first;
 * - an answer can be lost after the rows are stored (a reset: ECONNRESET), a request can time out on
 *   the client while the server goes on, an endpoint can refuse connections (ECONNREFUSED), and a
 *   server can refuse an insert it did not store (TOO_MANY_PARTS, 18.16's text);
 * - the offsets view is written after the table, and can fail after it: the table then holds rows
 *   its view lacks, and the insert is answered with the view's error;
 * - a read by session_start_time scans the part of the table its range covers (10^8 rows a year
 *   stand behind the rows the run writes), and max_execution_time ends it (TIMEOUT_EXCEEDED);
 * - the release decides whether max_execution_time ends an insert too: 18.16 runs one past it,
 *   26.9 ends it there, the table's rows written and the view's not (as the engine did in
 *   test/clickhouse/insert-life.test.ts), answered TIMEOUT_EXCEEDED;
 * - a request its client aborts (the membership lease's end) fails on the client at once, while
 *   the server goes on with what it received.
 * test/sim/fidelity.test.ts holds the reads to ClickHouse 18.16 and the 26.9 engine.
 */
import { ClickHouseError } from "@clickhouse/client";
import { boundsInsertLife } from "../../src/clickhouse/server-version.ts";
import { rowBinaryToTsv } from "../support/row-binary.ts";
import type { Actor, Scheduler } from "./scheduler.ts";

export const VERSION = "18.16.1";
const YEAR_S = 365 * 86_400;
/** Scan cost of the rows a year of session_start_time holds (10^8 rows at 10 ns a row). */
const SCAN_MS_PER_YEAR = 1_000_000;

export interface StoredRow {
  partition: number;
  offset: number;
  cdrId: string;
  sessionStart: number;
  ingestedAt: number;
  queryId: string;
  endpoint: number;
  /** Virtual time it was stored. */
  storedAt: number;
  /** Sent by a process the group no longer counted as the owner of its partition. */
  zombie: boolean;
}

interface Proc {
  queryId: string;
  user: string;
  endpoint: number;
  kill: () => void;
}

/** Faults of one endpoint, each active until the virtual time it names. */
export interface EndpointFaults {
  downUntil: number;
  lostAnswersUntil: number;
  refuseUntil: number;
  slowUntil: number;
  viewFailsUntil: number;
}

export class SimClickHouse {
  readonly rows: StoredRow[] = [];
  readonly viewRows: StoredRow[] = [];
  readonly processes = new Map<string, Proc>();
  readonly faults: EndpointFaults[];
  readonly #cuts = new Set<string>();
  /** Who owns a partition as the group's coordinator sees it (the world's Kafka); a sent row is judged by it. */
  ownerOf: (partition: number) => string | null = () => null;
  /** Inserts whose answer the server sent but the client never got (a reset after storing). */
  answersLost = 0;
  /** Each lost-answer read: who asked, when, which offsets it covered and which it found. */
  readonly rowReads: Array<{ actor: string; at: number; partitions: Set<number>; min: number; max: number; found: Set<string> }> = [];
  /** When a read of the table by session_start_time scanned for longer than a client waits (10 s). */
  lastLongScan = -1;
  /** When each process read the offsets table (its replay checks), by actor name. */
  readonly offsetReads = new Map<string, number[]>();

  /**
   * `scanMsPerYear`: what a read by session_start_time costs for each year its range covers: the
   * rows that stand behind the run's own (10^8 a year at 10 ns a row by default; 0 for the table alone).
   */
  constructor(
    readonly sched: Scheduler,
    endpoints: number,
    readonly table = "telecom.cdr",
    readonly scanMsPerYear = SCAN_MS_PER_YEAR,
    readonly version: string = VERSION,
  ) {
    this.faults = Array.from({ length: endpoints }, () => ({
      downUntil: 0,
      lostAnswersUntil: 0,
      refuseUntil: 0,
      slowUntil: 0,
      viewFailsUntil: 0,
    }));
  }

  cut(a: Actor, endpoint: number, ms: number): void {
    const key = `${a.name}|${endpoint}`;
    this.#cuts.add(key);
    this.sched.at(ms, () => this.#cuts.delete(key));
  }

  /** The client a worker uses for `endpoint` (the writer's ClickHouseClient). */
  client(a: Actor, endpoint: number, requestTimeoutMs: number, user = "default") {
    return new SimClickHouseClient(this, a, endpoint, requestTimeoutMs, user);
  }

  isCut(a: Actor, endpoint: number): boolean {
    return this.#cuts.has(`${a.name}|${endpoint}`);
  }

  isDown(endpoint: number): boolean {
    return this.sched.now < this.faults[endpoint]!.downUntil;
  }

  /** An insert arrived: it runs as a process, then stores, unless killed; `answer` hears how it ended. */
  runInsert(
    endpoint: number,
    queryId: string,
    user: string,
    body: Uint8Array,
    zombies: ReadonlySet<number>,
    answer: (a: InsertAnswer) => void,
    limitMs = 0,
  ) {
    const f = this.faults[endpoint]!;
    const now = this.sched.now;
    const runs = now < f.slowUntil ? this.sched.int(1_000, 15_000) : this.sched.int(2, 20);
    // A release that bounds an insert ends it at its limit: the table written, the view not.
    const ended = limitMs > 0 && boundsInsertLife(this.version) && runs > limitMs;
    const ms = ended ? limitMs : runs;
    let killed = false;
    const proc: Proc = {
      queryId,
      user,
      endpoint,
      kill: () => {
        killed = true;
        this.processes.delete(queryId);
      },
    };
    this.processes.set(queryId, proc);
    this.sched.at(ms, () => {
      if (killed) return answer({ kind: "refused", code: 394, text: "Query was cancelled" });
      this.processes.delete(queryId);
      const t = this.sched.now;
      if (t < f.refuseUntil)
        return answer({
          kind: "refused",
          code: 252,
          text: "Too many parts (300). Merges are processing significantly slower than inserts.",
        });
      const rows = decodeRows(body, queryId, endpoint, t, zombies);
      this.rows.push(...rows);
      if (ended) return answer({ kind: "refused", code: 159, text: `Timeout exceeded: elapsed ${limitMs / 1000} seconds, maximum: ${limitMs / 1000}` });
      if (t < f.viewFailsUntil)
        return answer({ kind: "refused", code: 252, text: "Too many parts (300) while pushing to view telecom.cdr_offsets_mv" });
      this.viewRows.push(...rows);
      if (t < f.lostAnswersUntil) {
        this.answersLost++;
        return answer({ kind: "reset" });
      }
      answer({ kind: "ok" });
    });
  }

  /** A read: its answer text and how long the server takes, or an error it ends with. */
  read(query: string, settings: Record<string, unknown> | undefined, reader = "-"): { text: string; ms: number } {
    const limitMs = Number(settings?.max_execution_time ?? 0) * 1000 || Infinity;
    const q = query.replace(/\s+/g, " ").trim();
    if (q === "SELECT version()") return { text: `${this.version}\n`, ms: 1 };
    // Its table is not Distributed: a process's initial query id is its own.
    let m = /^SELECT count\(\) FROM system\.processes WHERE (?:\(query_id IN \((.*)\) OR initial_query_id IN \(.*\)\)|initial_query_id IN \((.*)\))$/.exec(q);
    if (m) {
      const ids = quotedList(m[1] ?? m[2]!);
      return { text: `${ids.filter((id) => this.processes.has(id)).length}\n`, ms: 1 };
    }
    m = /^SELECT query_id FROM system\.processes WHERE (?:\(query_id LIKE '([^']*)%' OR initial_query_id LIKE '[^']*%'\)|query_id IN \((.*)\))(?: AND initial_user = '([^']*)')?$/.exec(q);
    if (m) {
      const [, prefix, list, user] = m;
      const ids = list !== undefined ? new Set(quotedList(list)) : null;
      const out = [...this.processes.values()].filter(
        (p) =>
          (ids ? ids.has(p.queryId) : p.queryId.startsWith(prefix!)) && (user === undefined || p.user === user),
      );
      return { text: out.map((p) => `${p.queryId}\n`).join(""), ms: 1 };
    }
    m = new RegExp(
      `^SELECT kafka_partition, kafka_offset, toString\\(cdr_id\\), toUInt32\\(session_start_time\\) FROM ${this.table} ` +
        `WHERE \\((.*)\\) AND kafka_partition IN \\(([\\d, ]*)\\) AND kafka_offset >= (\\d+) AND kafka_offset <= (\\d+)$`,
    ).exec(q);
    if (m) {
      const [seconds, parts, minO, maxO] = [m[1]!, m[2]!, m[3]!, m[4]!];
      const runs = seconds.split(" OR ").map((term) => {
        const point = /^session_start_time = toDateTime\((\d+)\)$/.exec(term);
        if (point) return [Number(point[1]), Number(point[1])] as const;
        const range = /^\(session_start_time >= toDateTime\((\d+)\) AND session_start_time <= toDateTime\((\d+)\)\)$/.exec(term);
        if (!range) throw new Error(`simulated ClickHouse: unknown session_start_time term: ${term}`);
        return [Number(range[1]), Number(range[2])] as const;
      });
      const ps = new Set(parts.split(",").map((s) => Number(s.trim())));
      // Each run costs at least a granule, and the span of seconds it covers.
      const ms = runs.reduce((sum, [lo, hi]) => sum + Math.max(1, ((hi - lo) / YEAR_S) * this.scanMsPerYear), 0);
      if (ms > 10_000) this.lastLongScan = this.sched.now;
      if (ms > limitMs) throw timeout(limitMs);
      const rows = this.rows.filter(
        (r) =>
          runs.some(([lo, hi]) => r.sessionStart >= lo && r.sessionStart <= hi) &&
          ps.has(r.partition) &&
          r.offset >= Number(minO) &&
          r.offset <= Number(maxO),
      );
      this.rowReads.push({
        actor: reader,
        at: this.sched.now,
        partitions: ps,
        min: Number(minO),
        max: Number(maxO),
        found: new Set(rows.map((r) => `${r.partition}:${r.offset}`)),
      });
      return { text: rows.map((r) => `${r.partition}\t${r.offset}\t${r.cdrId}\t${r.sessionStart}\n`).join(""), ms };
    }
    m = new RegExp(`^SELECT kafka_partition, kafka_offset FROM ${this.table}_offsets WHERE (.*)$`).exec(q);
    if (m) {
      const terms = [
        ...m[1]!.matchAll(
          /\(kafka_partition = (\d+) AND kafka_offset >= (\d+) (?:AND kafka_offset < (\d+) )?AND ingested_at >= toDateTime\((\d+)\)\)/g,
        ),
      ];
      if (terms.map((t) => t[0]).join(" OR ") !== m[1] && m[1] !== "0") throw new Error(`simulated ClickHouse: unknown WHERE: ${m[1]}`);
      const rows = this.viewRows.filter((r) =>
        terms.some(
          (t) =>
            r.partition === Number(t[1]) &&
            r.offset >= Number(t[2]) &&
            (t[3] === undefined || r.offset < Number(t[3])) &&
            r.ingestedAt >= Number(t[4]),
        ),
      );
      return { text: rows.map((r) => `${r.partition}\t${r.offset}\n`).join(""), ms: 2 };
    }
    throw new Error(`simulated ClickHouse does not know this query: ${q.slice(0, 300)}`);
  }

  command(query: string): void {
    const q = query.replace(/\s+/g, " ").trim();
    const m = /^KILL QUERY WHERE (?:\(query_id IN \((.*)\) OR initial_query_id IN \(.*\)\)|initial_query_id IN \((.*)\)) SYNC$/.exec(q);
    if (!m) throw new Error(`simulated ClickHouse does not know this command: ${q.slice(0, 300)}`);
    for (const id of quotedList(m[1] ?? m[2]!)) this.processes.get(id)?.kill();
  }
}

/** The names current releases append to an exception, for the codes this server answers inserts with. */
const CODE_NAMES: Record<number, string> = { 159: "TIMEOUT_EXCEEDED", 252: "TOO_MANY_PARTS", 394: "QUERY_WAS_CANCELLED" };

type InsertAnswer = { kind: "ok" } | { kind: "reset" } | { kind: "refused"; code: number; text: string };

/** The ClickHouseClient of one worker for one endpoint, with the client's own request timeout. */
export class SimClickHouseClient {
  constructor(
    readonly ch: SimClickHouse,
    readonly actor: Actor,
    readonly endpoint: number,
    readonly requestTimeoutMs: number,
    readonly user: string,
  ) {}

  /**
   * One HTTP request: refused at once by an endpoint that is down, lost on a cut path (the client
   * times out), else handled at the server after a network delay and answered to the actor.
   */
  #request<T>(serve: (reply: (fn: () => T) => void) => void, signal?: AbortSignal): Promise<T> {
    const { sched } = this.ch;
    const a = this.actor;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => T) => {
        if (settled) return;
        settled = true;
        cancelTimeout();
        try {
          resolve(fn());
        } catch (e) {
          reject(e);
        }
      };
      const cancelTimeout = sched.at(this.requestTimeoutMs, () => settle(() => { throw new Error("Timeout error."); }), a); // prettier-ignore
      // The client's abort ends the request on its side; what already reached the server goes on.
      const aborted = () => settle(() => { throw new Error("The user aborted a request."); }); // prettier-ignore
      if (signal?.aborted) return void sched.at(0, aborted, a);
      signal?.addEventListener("abort", aborted, { once: true });
      if (this.ch.isDown(this.endpoint)) {
        sched.at(1, () => settle(() => { throw netError("ECONNREFUSED", "connect ECONNREFUSED"); }), a); // prettier-ignore
        return;
      }
      if (this.ch.isCut(a, this.endpoint)) return; // the packets never arrive: the timeout answers
      sched.at(sched.int(1, 3), () => {
        serve((fn) => {
          // The answer's way back: lost on a cut path, else at the actor after a network delay.
          if (this.ch.isCut(a, this.endpoint)) return;
          const arrive = () => (a.onAnswer?.() ? sched.at(0, arrive, a) : settle(fn));
          sched.at(sched.int(1, 3), arrive, a);
        });
      });
    });
  }

  async exec(params: {
    query: string;
    values?: AsyncIterable<unknown>;
    query_id?: string;
    clickhouse_settings?: Record<string, unknown>;
    abort_signal?: AbortSignal;
  }) {
    // A query read through exec() (clickhouse/answer.ts): its format named in its text, its answer a
    // stream with the status and headers the client hands back under ignore_error_response. A
    // statement (KILL QUERY) is run as command() runs it, and answers no rows.
    if (params.values === undefined) {
      const query = params.query.replace(/ FORMAT (TabSeparated|JSONEachRow)$/, "");
      const text = query.startsWith("KILL QUERY")
        ? await this.command({ query }).then(() => "")
        : await (await this.query({ query, clickhouse_settings: params.clickhouse_settings })).text();
      return {
        stream: (async function* () {
          if (text) yield Buffer.from(text);
        })(),
        http_status_code: 200,
        response_headers: {} as Record<string, unknown>,
      };
    }
    const chunks: Buffer[] = [];
    for await (const c of params.values) chunks.push(c as Buffer);
    const body = new Uint8Array(Buffer.concat(chunks));
    if (!params.query.startsWith(`INSERT INTO ${this.ch.table} (`))
      throw new Error(`simulated ClickHouse does not know this insert: ${params.query.slice(0, 200)}`);
    // Judged when the request leaves: rows of partitions this process no longer owns.
    const zombies = new Set<number>();
    for (const line of rowBinaryToTsv(body)) {
      const p = Number(line.split("\t")[15]);
      if (this.ch.ownerOf(p) !== this.actor.name) zombies.add(p);
    }
    const limitMs = Number(params.clickhouse_settings?.max_execution_time ?? 0) * 1000;
    const current = boundsInsertLife(this.ch.version);
    return this.#request(
      (reply) =>
        this.ch.runInsert(this.endpoint, params.query_id!, this.user, body, zombies, (answer) => {
          if (answer.kind === "reset")
            return reply(() => {
              throw netError("ECONNRESET", "socket hang up");
            });
          const refused = answer.kind === "refused";
          // Each release's form of an exception (insert-error.ts reads both), and a current one's header.
          const text = !refused
            ? ""
            : current
              ? `Code: ${answer.code}. DB::Exception: ${answer.text}. (${CODE_NAMES[answer.code] ?? "UNKNOWN"}) (version ${this.ch.version})\n`
              : `Code: ${answer.code}, e.displayText() = DB::Exception: ${answer.text}, e.what() = DB::Exception\n`;
          reply(() => ({
            stream: (async function* () {
              if (text) yield Buffer.from(text);
            })(),
            http_status_code: refused ? 500 : 200,
            response_headers: (refused && current ? { "x-clickhouse-exception-code": String(answer.code) } : {}) as Record<string, unknown>,
          }));
        }, limitMs),
      params.abort_signal,
    );
  }

  query(params: { query: string; format?: string; clickhouse_settings?: Record<string, unknown> }) {
    return this.#request<{ text: () => Promise<string> }>((reply) => {
      if (params.query.includes(`${this.ch.table}_offsets`)) {
        const reads = this.ch.offsetReads.get(this.actor.name) ?? [];
        this.ch.offsetReads.set(this.actor.name, [...reads, this.ch.sched.now]);
      }
      let answer: { text: string; ms: number } | null = null, error: unknown;
      try {
        answer = this.ch.read(params.query, params.clickhouse_settings, this.actor.name);
      } catch (e) {
        error = e;
      }
      const limit = Number(params.clickhouse_settings?.max_execution_time ?? 0) * 1000;
      const ms = answer ? answer.ms : limit || 1;
      this.ch.sched.at(ms, () =>
        reply(() => {
          if (error) throw error;
          const text = answer!.text;
          return { text: async () => text };
        }),
      );
    });
  }

  command(params: { query: string }) {
    return this.#request<{ query_id: string }>((reply) => {
      let error: unknown;
      try {
        this.ch.command(params.query);
      } catch (e) {
        error = e;
      }
      reply(() => {
        if (error) throw error;
        return { query_id: "" };
      });
    });
  }

  async ping(): Promise<{ success: boolean }> {
    return this.#request<{ success: boolean }>((reply) => reply(() => ({ success: true }))).catch(() => ({
      success: false,
    }));
  }
}

function decodeRows(
  body: Uint8Array,
  queryId: string,
  endpoint: number,
  storedAt: number,
  zombies: ReadonlySet<number>,
): StoredRow[] {
  return rowBinaryToTsv(body).map((line) => {
    const c = line.split("\t");
    return {
      cdrId: c[0]!,
      sessionStart: Number(c[7]),
      ingestedAt: Number(c[14]),
      partition: Number(c[15]),
      offset: Number(c[16]),
      queryId,
      endpoint,
      storedAt,
      zombie: zombies.has(Number(c[15])),
    };
  });
}

/** The strings of an `IN (…)` list; an empty list is a syntax error, as the server answers it. */
function quotedList(s: string): string[] {
  if (s.trim() === "")
    throw new ClickHouseError({
      message: "Code: 62, e.displayText() = DB::Exception: Syntax error: Expected non-empty parenthesized list of expressions, e.what() = DB::Exception",
      code: "62",
      type: "",
    });
  return [...s.matchAll(/'((?:[^'\\]|\\.)*)'/g)].map((m) => m[1]!.replace(/\\(.)/g, "$1"));
}

function netError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

function timeout(limitMs: number): ClickHouseError {
  const s = limitMs / 1000;
  return new ClickHouseError({
    message: `Code: 159, e.displayText() = DB::Exception: Timeout exceeded: elapsed ${s} seconds, maximum: ${s}, e.what() = DB::Exception`,
    code: "159",
    type: "",
  });
}
