/**
 * Kafka's SASL password follows its file (KAFKA_PROP_SASL_PASSWORD_FILE) while the worker runs.
 * librdkafka's rd_kafka_sasl_set_credentials (PLAIN and SCRAM) sets what the client's next
 * authentication uses: a connection made anew, or a re-authentication the broker asks for
 * (connections.max.reauth.ms). Each client made with a sasl.password is followed: at most every
 * second the file is looked at (the SecretFile reads it at most every REREAD_INTERVAL_MS, and at
 * once after a refused authentication), and a changed password is set on every client. Rotate the
 * broker's password first, then the file: SCRAM keeps one password a user, and a file changed
 * first would be refused until the broker has it. Called on the JS thread only (a timer, the error
 * callback), as every librdkafka call here. The content is never logged.
 */
import type { Pointer } from "bun:ffi";
import { log } from "../log.ts";
import { secretFile, type SecretFile } from "../secrets/secret-file.ts";
import { cstr, rdk } from "./native.ts";

const LOOK_MS = 1_000;

let followed: SecretFile | null = null;
/** Each followed client: its sasl.username, and the secret's generation it was last given. */
const clients = new Map<Pointer, { username: string; generation: number }>();
let timer: ReturnType<typeof setInterval> | null = null;

/** The password of every client comes from `path` (its content at start: `value`) from now on. */
export function followSaslPassword(path: string, value: string): void {
  followed = secretFile(path, value);
}

/** A client made with these properties: followed when its sasl.password comes from the file. */
export function followClient(rk: Pointer, props: Readonly<Record<string, string>>): void {
  if (!followed || props["sasl.password"] === undefined) return;
  clients.set(rk, { username: props["sasl.username"] ?? "", generation: followed.generation });
  timer ??= setInterval(apply, LOOK_MS);
  timer.unref?.();
}

/** A client destroyed: no longer followed. */
export function unfollowClient(rk: Pointer): void {
  clients.delete(rk);
  if (clients.size === 0 && timer) {
    clearInterval(timer);
    timer = null;
  }
}

/** A broker refused a client's authentication: the file may hold a newer password. */
export function saslRefused(): void {
  if (!followed || clients.size === 0) return;
  followed.reread();
  apply();
}

function apply(): void {
  if (!followed) return;
  const password = followed.value; // reads the file again once its interval has passed
  const lib = rdk();
  for (const [rk, c] of clients) {
    if (c.generation === followed.generation) continue;
    const err = lib.rd_kafka_sasl_set_credentials(rk, cstr(c.username), cstr(password));
    if (err) {
      log.warn("librdkafka refused the new SASL credentials", { reason: String(lib.rd_kafka_error_string(err)) });
      lib.rd_kafka_error_destroy(err);
      continue;
    }
    c.generation = followed.generation;
    log.info("the Kafka client takes the new SASL password at its next authentication", { file: followed.path });
  }
}
