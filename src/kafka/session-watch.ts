/**
 * Under group.protocol=consumer the broker keeps the group's session (group-session.ts), and an
 * operator may change it while the workers run (kafka-configs --alter --group). The coordinator
 * applies a new session at the member's next heartbeat; the membership lease is measured against
 * it, so the worker reads it again every SESSION_REREAD_MS and hands a change on. A shorter session
 * is known at most that long after it is set: the one window the lease has against such a change
 * (docs/internals.md). A read that fails keeps the terms last read and is said once until one succeeds.
 */
import { log } from "../log.ts";
import type { Admin } from "./admin.ts";
import { groupSessionTerms, type SessionTerms } from "./group-session.ts";

export const SESSION_REREAD_MS = 30_000;

export class SessionWatch {
  readonly #timer: ReturnType<typeof setInterval>;
  #terms: SessionTerms;
  #failing = false;
  #reading = false;

  constructor(
    readonly admin: Pick<Admin, "describeConfigs">,
    readonly group: string,
    initial: SessionTerms,
    readonly onChange: (terms: SessionTerms) => void,
    intervalMs = SESSION_REREAD_MS,
  ) {
    this.#terms = initial;
    this.#timer = setInterval(() => void this.read(), intervalMs);
    this.#timer.unref();
  }

  get terms(): SessionTerms {
    return this.#terms;
  }

  /** One reading; a change is handed on. */
  async read(): Promise<void> {
    if (this.#reading) return;
    this.#reading = true;
    try {
      const next = await groupSessionTerms(this.admin, this.group);
      if (this.#failing) log.info("the group's session is read again", { session_timeout_ms: next.sessionTimeoutMs });
      this.#failing = false;
      const was = this.#terms;
      if (next.sessionTimeoutMs === was.sessionTimeoutMs && next.heartbeatIntervalMs === was.heartbeatIntervalMs)
        return;
      this.#terms = next;
      log.warn("the group's session changed: the membership lease follows it", {
        session_timeout_ms: next.sessionTimeoutMs,
        was_ms: was.sessionTimeoutMs,
        heartbeat_interval_ms: next.heartbeatIntervalMs,
      });
      this.onChange(next);
    } catch (e) {
      if (!this.#failing)
        log.warn("the group's session could not be read again; the lease keeps the session last read", {
          session_timeout_ms: this.#terms.sessionTimeoutMs,
          err: e as Error,
        });
      this.#failing = true;
    } finally {
      this.#reading = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
