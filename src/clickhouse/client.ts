/** The ClickHouse HTTP client of the worker, built from configuration. */
import { createClient, type ClickHouseClient } from "@clickhouse/client";
import { CdrWorkerError } from "../errors.ts";
import { log } from "../log.ts";
import { ANSWER_DEADLINE_MARGIN_MS } from "./answer.ts";
import { rotatingClient } from "./credentials.ts";
import { secretFile } from "../secrets/secret-file.ts";

/** Where and as whom the worker reaches ClickHouse: the configuration's `clickhouse` section. */
export interface ClickHouseOptions {
  url: string;
  user: string;
  password: string;
  /** CLICKHOUSE_PASSWORD_FILE: the password follows it while the worker runs (clickhouse/credentials.ts). */
  passwordFile?: string;
  database: string;
  table: string;
  requestTimeoutMs: number;
  keepAliveIdleMs?: number;
  caCert?: Buffer;
}

type LogParams = { module: string; message: string; args?: Record<string, unknown>; err?: Error };

/**
 * The client's own log lines, as JSON lines like every other (its default logger prints
 * multi-line text). Its errors arrive as our typed errors too, so they log at debug only.
 */
class ClientLogger {
  trace(): void {}
  debug(p: LogParams): void {
    log.debug(p.message, { component: "clickhouse-client", module: p.module });
  }
  info(p: LogParams): void {
    log.debug(p.message, { component: "clickhouse-client", module: p.module });
  }
  warn(p: LogParams): void {
    log.warn(p.message, { component: "clickhouse-client", module: p.module, err: p.err });
  }
  error(p: LogParams): void {
    log.debug(p.message, { component: "clickhouse-client", module: p.module, err: p.err });
  }
}

/** The endpoints of CLICKHOUSE_URL, a comma-separated list. */
export function clickhouseUrls(url: string): string[] {
  return url
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
}

/** A client for each endpoint, named host:port (no credentials), and its ping, for ClickHouseWriter. */
export function createClickHouseEndpoints(
  cfg: ClickHouseOptions,
): Array<{ name: string; client: ClickHouseClient; ping: Ping }> {
  return clickhouseUrls(cfg.url).map((url) => ({
    name: new URL(url).host,
    client: createClickHouse(cfg, undefined, url),
    ping: pingOf(url, cfg.caCert),
  }));
}

/** Whether the endpoint answers `/ping` with `Ok.`; ended by `signal`. */
export type Ping = (signal: AbortSignal) => Promise<boolean>;

/** Most bytes of a `/ping` answer read: `Ok.` and a newline, or an error page. */
const PING_ANSWER_BYTES = 4096;

/**
 * `GET /ping`, its answer read up to PING_ANSWER_BYTES: the client's own ping reads an error's body
 * whole, which an endpoint that is not ClickHouse can make as large as it likes. No credentials go.
 */
export function pingOf(url: string, caCert?: Buffer): Ping {
  const u = new URL(url);
  const target = `${u.protocol}//${u.host}${u.pathname.replace(/\/$/, "")}/ping`;
  return async (signal) => {
    const res = await fetch(target, { signal, ...(caCert ? { tls: { ca: caCert.toString() } } : {}) });
    const reader = res.body?.getReader();
    let text = "";
    while (reader && text.length <= PING_ANSWER_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString("latin1");
    }
    await reader?.cancel().catch(() => {});
    return res.ok && text.trim() === "Ok.";
  };
}

/**
 * A client for one endpoint: `url`, else the first of CLICKHOUSE_URL. With CLICKHOUSE_PASSWORD_FILE
 * it follows the file (credentials.ts): a rotated password is taken without a restart.
 */
export function createClickHouse(cfg: ClickHouseOptions, database?: string, url?: string): ClickHouseClient {
  const make = (password: string) => clientFor(cfg, password, database, url);
  if (cfg.passwordFile === undefined) return make(cfg.password);
  const closeAfter = (cfg.requestTimeoutMs + ANSWER_DEADLINE_MARGIN_MS) * 2;
  return rotatingClient(secretFile(cfg.passwordFile, cfg.password), make, closeAfter);
}

function clientFor(cfg: ClickHouseOptions, password: string, database?: string, url?: string): ClickHouseClient {
  return createClient({
    url: url ?? clickhouseUrls(cfg.url)[0]!,
    username: cfg.user,
    password,
    database: database ?? cfg.database,
    request_timeout: cfg.requestTimeoutMs,
    // ClickHouse closes idle keep-alive sockets after its keep_alive_timeout (3 s on 18.16, 10 s in
    // this project's config): the client drops its idle sockets sooner, and a reset that still hits
    // a reused socket is resent at once (writer.ts). scripts/bench/connects.ts counts connects per insert.
    keep_alive:
      cfg.keepAliveIdleMs === 0 ? { enabled: false } : { enabled: true, idle_socket_ttl: cfg.keepAliveIdleMs ?? 2000 },
    // 18.16 predates most settings; send none by default.
    clickhouse_settings: {},
    application: "cdr-worker",
    // https:// with a private CA (CLICKHOUSE_CA_CERT); without it the system's CAs are trusted.
    ...(cfg.caCert ? { tls: { ca_cert: cfg.caCert } } : {}),
    log: { LoggerClass: ClientLogger },
  });
}

/**
 * The first of CLICKHOUSE_URL's endpoints that answers, in order: each holds every row (a server, or
 * a replica whose Distributed table reads every shard), so any one will do, but not only the first.
 */
export async function answeringClient(cfg: ClickHouseOptions): Promise<ClickHouseClient> {
  const failures: string[] = [];
  for (const url of clickhouseUrls(cfg.url)) {
    const ch = createClickHouse(cfg, undefined, url);
    const answer = await ch.query({ query: "SELECT 1", format: "TabSeparated" }).then(
      (r) => r.text(),
      (e: Error) => e,
    );
    if (typeof answer === "string") return ch;
    failures.push(`${new URL(url).host}: ${answer.message}`);
    await ch.close();
  }
  throw new CdrWorkerError("CLICKHOUSE_UNREACHABLE", `no ClickHouse endpoint answers: ${failures.join("; ")}`, true);
}
