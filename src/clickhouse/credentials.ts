/**
 * The ClickHouse password follows its file (CLICKHOUSE_PASSWORD_FILE): a secret rotated by the
 * operator, in either order, is taken without a restart. The file is read again when a server
 * refuses the worker's credentials (writer.ts calls renewCredentials) and, at most every
 * REREAD_INTERVAL_MS, on the next request: a file changed first is in use before the server's old
 * password is withdrawn, and a server changed first is answered by the file's new content at the
 * next attempt. A client whose secret changed is made anew with it; the old one is closed once its
 * requests have had time to end. The content is never logged.
 */
import type { ClickHouseClient } from "@clickhouse/client";
import { readFileSync } from "node:fs";
import { log } from "../log.ts";

/** Longest a changed password file goes unread while requests go out. */
export const REREAD_INTERVAL_MS = 10_000;

/** A secret file's content with one trailing newline dropped, as editors and `echo` leave one. */
export function readSecretFile(path: string): string {
  return readFileSync(path, "utf8").replace(/\r?\n$/, "");
}

/** One secret file, read again on demand; `generation` counts the changes seen. */
export class SecretFile {
  #value: string;
  #readAt: number;
  generation = 0;
  constructor(
    readonly path: string,
    value: string,
    readonly now: () => number = () => performance.now(),
  ) {
    this.#value = value;
    this.#readAt = now();
  }

  get value(): string {
    if (this.now() - this.#readAt >= REREAD_INTERVAL_MS) this.reread();
    return this.#value;
  }

  /** Reads the file again; true when its content changed. A file that cannot be read keeps the last value. */
  reread(): boolean {
    this.#readAt = this.now();
    let next: string;
    try {
      next = readSecretFile(this.path);
    } catch (e) {
      log.warn("the password file cannot be read; the last password read stays in use", {
        file: this.path,
        code: (e as NodeJS.ErrnoException).code ?? "unreadable",
      });
      return false;
    }
    if (next === this.#value) return false;
    this.#value = next;
    this.generation++;
    log.info("the password file holds a new password; ClickHouse clients use it from now on", { file: this.path });
    return true;
  }
}

const secrets = new Map<string, SecretFile>();
const rotating = new WeakMap<object, SecretFile>();

/** The one SecretFile of a path, so every client of the process follows the same read. */
export function secretFile(path: string, value: string): SecretFile {
  let s = secrets.get(path);
  if (!s) secrets.set(path, (s = new SecretFile(path, value)));
  return s;
}

/**
 * A client that follows `secret`: each use takes the client made with the secret's current value,
 * made anew when it changed. `make` builds a client for a password.
 */
export function rotatingClient(
  secret: SecretFile,
  make: (password: string) => ClickHouseClient,
  closeAfterMs: number,
): ClickHouseClient {
  let generation = secret.generation;
  let current = make(secret.value);
  const currentClient = (): ClickHouseClient => {
    const value = secret.value; // may read the file again (the interval)
    if (secret.generation !== generation) {
      const old = current;
      generation = secret.generation;
      current = make(value);
      // Requests under way on the old client end within their deadline; then its sockets go.
      setTimeout(() => void old.close().catch(() => {}), closeAfterMs).unref?.();
    }
    return current;
  };
  const proxy = new Proxy({} as ClickHouseClient, {
    get(_, prop) {
      const c = currentClient();
      const v = Reflect.get(c, prop, c);
      return typeof v === "function" ? v.bind(c) : v;
    },
  });
  rotating.set(proxy, secret);
  return proxy;
}

/** The server refused this client's credentials: its password file is read again (no-op for others). */
export function renewCredentials(client: ClickHouseClient): void {
  rotating.get(client)?.reread();
}
