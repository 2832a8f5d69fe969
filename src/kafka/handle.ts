/**
 * Creating a librdkafka handle: properties set by name, log and error callbacks that run on the
 * JS thread, and the error helpers every other kafka/ module uses.
 *
 * Why callbacks are safe here: with `log.queue=true` and rd_kafka_set_log_queue(), librdkafka
 * forwards logs and errors to a queue that it serves only inside the poll/consume call the JS
 * thread makes; no callback ever runs on one of librdkafka's own threads.
 */
import { CString, JSCallback, ptr, type Pointer } from "bun:ffi";
import { KafkaError, type ErrorCode } from "../errors.ts";
import { log } from "../log.ts";
import { cstr, rdk } from "./native.ts";
import { RD } from "./structs.ts";
import { followClient, saslRefused, unfollowClient } from "./sasl-credentials.ts";

export type KafkaProps = Record<string, string>;

export function errName(code: number): string {
  return String(rdk().rd_kafka_err2name(code));
}

/**
 * Codes a later attempt can get past: the broker or coordinator not answering or moving, a leader
 * election, a rebalance. librdkafka says so itself only for rd_kafka_error_t (takeError).
 */
const TRANSIENT = new Set([
  -195, // _TRANSPORT
  -192, // _MSG_TIMED_OUT
  -187, // _ALL_BROKERS_DOWN
  -185, // _TIMED_OUT
  -180, // _WAIT_COORD
  -193, // _RESOLVE
  5, // LEADER_NOT_AVAILABLE
  6, // NOT_LEADER_OR_FOLLOWER
  7, // REQUEST_TIMED_OUT
  13, // NETWORK_EXCEPTION
  14, // COORDINATOR_LOAD_IN_PROGRESS
  15, // COORDINATOR_NOT_AVAILABLE
  16, // NOT_COORDINATOR
  19, // NOT_ENOUGH_REPLICAS
  20, // NOT_ENOUGH_REPLICAS_AFTER_APPEND
  27, // REBALANCE_IN_PROGRESS
]);

/**
 * The group's answers while it rebalances (REBALANCE_IN_PROGRESS; after a session or coordinator
 * loss UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION; under KIP-848 STALE_MEMBER_EPOCH or
 * FENCED_MEMBER_EPOCH): the request did nothing, and the same one after the rejoin may succeed.
 */
export const REBALANCE_REFUSALS: ReadonlySet<string> = new Set([
  "REBALANCE_IN_PROGRESS",
  "UNKNOWN_MEMBER_ID",
  "ILLEGAL_GENERATION",
  "STALE_MEMBER_EPOCH",
  "FENCED_MEMBER_EPOCH",
]);

/** True for a code a later attempt can get past (TRANSIENT). */
export function isTransient(err: number): boolean {
  return TRANSIENT.has(err);
}

export function kafkaError(
  code: ErrorCode,
  what: string,
  err: number,
  retryable = isTransient(err),
  options?: { cause?: unknown },
): KafkaError {
  const text = `${what}: ${errName(err)}: ${rdk().rd_kafka_err2str(err)}`;
  return new KafkaError(code, text, err, errName(err), retryable, options);
}

/** Reads an rd_kafka_error_t*, destroys it, and returns it as a KafkaError (null pointer → null). */
export function takeError(code: ErrorCode, what: string, error: Pointer | null): KafkaError | null {
  if (!error) return null;
  const lib = rdk();
  const num = lib.rd_kafka_error_code(error);
  const text = `${what}: ${errName(num)}: ${lib.rd_kafka_error_string(error)}`;
  const e = new KafkaError(code, text, num, errName(num), lib.rd_kafka_error_is_retriable(error) !== 0);
  lib.rd_kafka_error_destroy(error);
  return e;
}

/**
 * The buffer librdkafka writes a refusal's text into (conf_set, rd_kafka_new, NewTopic_new,
 * AdminOptions), and its reader: the one place that knows its size and that the text ends at NUL.
 */
export class ErrorText {
  static readonly SIZE = 512;
  readonly buf = Buffer.alloc(ErrorText.SIZE);
  get size(): number {
    return ErrorText.SIZE;
  }
  toString(): string {
    const end = this.buf.indexOf(0);
    return this.buf.toString("utf8", 0, end < 0 ? this.buf.length : end);
  }
}

// Out-parameters of rd_kafka_event_log, reused: const char **fac, const char **str, int *level.
const logOut = new BigUint64Array(2);
const logLevel = new Int32Array(1);

/** Logs an EVENT_LOG or EVENT_ERROR event taken off a queue polled with the event API; false for others. */
export function logEvent(ev: Pointer, client: string): boolean {
  const lib = rdk();
  const type = lib.rd_kafka_event_type(ev);
  if (type === RD.EVENT_LOG) {
    // int rd_kafka_event_log(rd_kafka_event_t *rkev, const char **fac, const char **str, int *level);
    if (lib.rd_kafka_event_log(ev, ptr(logOut), ptr(logOut, 8), ptr(logLevel)) === 0) {
      const fac = String(new CString(Number(logOut[0]) as Pointer));
      const msg = String(new CString(Number(logOut[1]) as Pointer));
      logAt(logLevel[0]!, msg, { component: "librdkafka", client, facility: fac });
    }
    return true;
  }
  if (type === RD.EVENT_ERROR) {
    const err = lib.rd_kafka_event_error(ev);
    const reason = String(lib.rd_kafka_event_error_string(ev));
    const ctx = { component: "librdkafka", client, code: errName(err), reason };
    if (lib.rd_kafka_event_error_is_fatal(ev)) log.error("fatal kafka client error", ctx);
    else log.warn("kafka client error", ctx);
    return true;
  }
  return false;
}

/** syslog levels: 0-3 error, 4 warning, 5-6 info, 7 debug. */
function logAt(level: number, msg: string, ctx: Record<string, unknown>): void {
  if (level <= 3) log.error(msg, ctx);
  else if (level === 4) log.warn(msg, ctx);
  else if (level <= 6) log.info(msg, ctx);
  else log.debug(msg, ctx);
}

/**
 * Each property librdkafka's own setter refuses (unknown name, bad value), with its reason; no
 * handle is created, nothing connects. The CLI checks KAFKA_PROP_* with it at start (exit 2).
 */
export function refusedProps(props: KafkaProps): Array<{ name: string; reason: string }> {
  const lib = rdk();
  const conf = lib.rd_kafka_conf_new()!;
  const errstr = new ErrorText();
  const refused: Array<{ name: string; reason: string }> = [];
  try {
    for (const [name, value] of Object.entries(props))
      if (lib.rd_kafka_conf_set(conf, cstr(name), cstr(value), errstr.buf, errstr.size) !== RD.CONF_OK)
        refused.push({ name, reason: errstr.toString() });
  } finally {
    lib.rd_kafka_conf_destroy(conf);
  }
  return refused;
}

/** The handle plus the callbacks that must live as long as it does. */
export interface Handle {
  rk: Pointer;
  callbacks: JSCallback[];
  /**
   * The last error that says the brokers refuse this client as configured: SASL authentication
   * failed, or the broker's certificate failed verification (`at`: performance.now()). No retry
   * gets past either while the configuration stands.
   */
  refused: { code: number; reason: string; at: number } | null;
}

const AUTHENTICATION = -169; // _AUTHENTICATION
const SSL = -181; // _SSL

/** An error callback's code and reason that no reconnect can get past (Handle.refused). */
export function refusesClient(code: number, reason: string): boolean {
  return code === AUTHENTICATION || (code === SSL && /certificate verify failed/i.test(reason));
}

/** Every client's properties, with the one no caller may change. */
export function handleProperties(props: KafkaProps): KafkaProps {
  // Last: with log.queue=false librdkafka would run the JS log callback on its own threads.
  return { ...props, "log.queue": "true" };
}

/**
 * Builds an rd_kafka_conf_t from properties (each rejected one is a KAFKA_CONFIG error naming it),
 * lets `extend` add callbacks or events, and creates the handle.
 */
export function createHandle(
  type: 0 | 1,
  props: KafkaProps,
  extend?: (conf: Pointer, callbacks: JSCallback[]) => void,
): Handle {
  const lib = rdk();
  const conf = lib.rd_kafka_conf_new()!;
  const errstr = new ErrorText();
  const all = handleProperties(props);
  for (const [name, value] of Object.entries(all)) {
    if (lib.rd_kafka_conf_set(conf, cstr(name), cstr(value), errstr.buf, errstr.size) !== RD.CONF_OK) {
      lib.rd_kafka_conf_destroy(conf);
      throw new KafkaError("KAFKA_CONFIG", `librdkafka property ${name}: ${errstr.toString()}`);
    }
  }
  const callbacks: JSCallback[] = [];
  let refused: Handle["refused"] = null;
  const logCb = new JSCallback(
    (_rk: Pointer, level: number, fac: Pointer, buf: Pointer) => {
      logAt(level, String(new CString(buf)), { component: "librdkafka", facility: String(new CString(fac)) });
    },
    { args: ["ptr", "i32", "ptr", "ptr"], returns: "void" },
  );
  const errorCb = new JSCallback(
    (_rk: Pointer, err: number, reason: Pointer) => {
      const text = String(new CString(reason));
      if (refusesClient(err, text)) refused = { code: err, reason: text, at: performance.now() };
      if (err === AUTHENTICATION) saslRefused();
      log.warn("kafka client error", { component: "librdkafka", code: errName(err), reason: text });
    },
    { args: ["ptr", "i32", "ptr", "ptr"], returns: "void" },
  );
  callbacks.push(logCb, errorCb);
  lib.rd_kafka_conf_set_log_cb(conf, logCb.ptr);
  lib.rd_kafka_conf_set_error_cb(conf, errorCb.ptr);
  extend?.(conf, callbacks);
  const rk = lib.rd_kafka_new(type, conf, errstr.buf, errstr.size);
  if (!rk) {
    // rd_kafka_new frees conf only on success.
    lib.rd_kafka_conf_destroy(conf);
    for (const cb of callbacks) cb.close();
    throw new KafkaError("KAFKA_CONFIG", `cannot create Kafka client: ${errstr.toString()}`);
  }
  lib.rd_kafka_set_log_queue(rk, null);
  followClient(rk, props);
  return {
    rk,
    callbacks,
    get refused() {
      return refused;
    },
  };
}

/** `flags` for rd_kafka_destroy_flags (DESTROY_F_NO_CONSUMER_CLOSE: a consumer that was closed already). */
export function destroyHandle(h: Handle, flags = 0): void {
  unfollowClient(h.rk);
  rdk().rd_kafka_destroy_flags(h.rk, flags);
  for (const cb of h.callbacks) cb.close();
  h.callbacks.length = 0;
}


/** The error of a call on a client that was closed: thrown before any native code runs. */
export function closedError(what: string): KafkaError {
  return new KafkaError("KAFKA_CLIENT", `${what}: the Kafka client is closed`);
}

/**
 * Waits for the next event on a private queue, polling without blocking the event loop. `open`
 * is asked before every poll: a client closed during the wait has freed the queue.
 */
export async function pollQueue(
  queue: Pointer,
  timeoutMs = 60_000,
  open: () => boolean = () => true,
): Promise<Pointer> {
  const lib = rdk();
  const deadline = Date.now() + timeoutMs;
  for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
    if (!open()) throw closedError("waiting for Kafka");
    const ev = lib.rd_kafka_queue_poll(queue, 0);
    if (ev) return ev;
    if (Date.now() > deadline)
      throw new KafkaError(
        "KAFKA_CLIENT",
        `no answer from Kafka within ${timeoutMs} ms`,
        RD.ERR__TIMED_OUT,
        "_TIMED_OUT",
        true,
      );
    await Bun.sleep(wait);
  }
}
