/**
 * SIGTERM / SIGINT: the first asks for a graceful stop (flush, commit, leave the group) bounded by
 * the shutdown timeout; a second signal, or the timeout, exits 1 without committing anything
 * that is not durable.
 */
import { exitNow } from "../exits.ts";
import { log } from "../log.ts";

export function onShutdownSignals(stop: () => void, timeoutMs: number): void {
  let signals = 0;
  const handle = (signal: string) => {
    if (++signals > 1) {
      log.error("second signal: exiting without committing what is not durable", { signal });
      exitNow("SECOND_SIGNAL");
    }
    log.info("stopping: flushing and committing", { signal });
    stop();
    setTimeout(() => {
      log.error("shutdown timed out: exiting without committing what is not durable", { timeout_ms: timeoutMs });
      exitNow("SHUTDOWN_TIMEOUT");
    }, timeoutMs).unref();
  };
  process.on("SIGTERM", () => handle("SIGTERM"));
  process.on("SIGINT", () => handle("SIGINT"));
}
