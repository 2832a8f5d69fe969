/**
 * A secret read from a file (`<NAME>_FILE`, as container platforms mount secrets) that follows the
 * file while the process runs: read again on demand (a server refused the secret) and at most every
 * REREAD_INTERVAL_MS on use. One instance a path, so every client of the process follows the same
 * read. The content is never logged. Users: clickhouse/credentials.ts, kafka/sasl-credentials.ts.
 */
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
      log.warn("the secret file cannot be read; the last value read stays in use", {
        file: this.path,
        code: (e as NodeJS.ErrnoException).code ?? "unreadable",
      });
      return false;
    }
    if (next === this.#value) return false;
    this.#value = next;
    this.generation++;
    log.info("the secret file holds a new value; its clients use it from now on", { file: this.path });
    return true;
  }
}

const secrets = new Map<string, SecretFile>();

/** The one SecretFile of a path, so every client of the process follows the same read. */
export function secretFile(path: string, value: string): SecretFile {
  let s = secrets.get(path);
  if (!s) secrets.set(path, (s = new SecretFile(path, value)));
  return s;
}
