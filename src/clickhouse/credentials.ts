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
import type { SecretFile } from "../secrets/secret-file.ts";


const rotating = new WeakMap<object, SecretFile>();

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
