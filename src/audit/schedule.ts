/**
 * The audit on a schedule (AUDIT_INTERVAL_SECONDS), run by a worker as a child process of its own
 * executable: the audit reads a whole topic range and blocks on Kafka calls, which the worker's
 * loop must not wait for. Each run covers the records of the last two intervals (so consecutive
 * runs overlap) up to the group's committed offset; its summary line is kept for stats and
 * metrics. A run still going when the next is due is not doubled.
 *
 * One worker of a group audits: the owner of the raw topic's partition 0 (`due`). Every worker
 * auditing every partition would read the topic N times and page N times for one finding. A worker
 * that stops being the owner stops exporting findings, so an alert on them resolves with the new
 * owner's next run instead of staying on the old owner's last.
 */
import { log } from "../log.ts";
import type { Finding } from "./reconcile.ts";

/** Set for the scheduled audit's child: the worker's pid, which the child ends with (libc.endWithParent). */
export const PARENT_PID_VARIABLE = "CDR_WORKER_PARENT_PID";

export interface AuditResult {
  /** When the run ended (ms). */
  at: number;
  seconds: number;
  /** "clean", "failed" (findings), or "error" (it could not run: see the log). */
  result: "clean" | "failed" | "error";
  findings: Record<Finding, number> | null;
}

/** The command that runs this executable: the compiled binary itself, or bun and the entry script. */
function self(): string[] {
  return Bun.main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, Bun.main];
}

export class AuditSchedule {
  last: AuditResult | null = null;
  runs = { clean: 0, failed: 0, error: 0 };
  readonly #intervalMs: number;
  readonly #timer: ReturnType<typeof setInterval>;
  #running: Promise<void> | null = null;
  #child: ReturnType<typeof Bun.spawn> | null = null;
  #stopped = false;
  readonly #spawn: typeof Bun.spawn;

  constructor(intervalMs: number, opts: { due?: () => boolean; spawn?: typeof Bun.spawn } = {}) {
    this.#intervalMs = intervalMs;
    const due = opts.due ?? (() => true);
    this.#spawn = opts.spawn ?? Bun.spawn;
    this.#timer = setInterval(() => {
      if (!due()) {
        if (this.last?.findings) this.last = { ...this.last, findings: null };
        return;
      }
      this.#running ??= this.#run().finally(() => (this.#running = null));
    }, intervalMs);
  }

  /** No run starts after this, and a run going now is ended: the audit never outlives its worker. */
  stop(): void {
    clearInterval(this.#timer);
    this.#stopped = true;
    this.#child?.kill("SIGTERM");
  }

  async #run(): Promise<void> {
    const started = Date.now();
    const since = new Date(started - 2 * this.#intervalMs).toISOString();
    let result: AuditResult["result"] = "error";
    let findings: AuditResult["findings"] = null;
    try {
      // PARENT_PID_VARIABLE: the child asks the kernel to end it should this process end first
      // (SIGKILL, a crash), which stop() cannot cover.
      const child = this.#spawn([...self(), "audit", "--since", since], {
        env: { ...process.env, LOG_LEVEL: "warn", [PARENT_PID_VARIABLE]: String(process.pid) },
        stdout: "pipe",
        stderr: "pipe",
      });
      this.#child = child;
      const [out, err, code] = await Promise.all([
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
        child.exited,
      ]);
      const summary = JSON.parse(out.trim().split("\n").at(-1) || "null") as
        | (Record<Finding, number> & { audit?: string })
        | null;
      if ((code === 0 || code === 1) && summary?.audit) {
        result = summary.audit === "clean" ? "clean" : "failed";
        const { missing, stored_twice, dead_lettered_twice, stored_and_dead_lettered, not_a_record } = summary;
        findings = { missing, stored_twice, dead_lettered_twice, stored_and_dead_lettered, not_a_record };
      } else if (!this.#stopped)
        log.warn("scheduled audit could not run", { exit_code: code, stderr: err.trim().slice(-2000) });
    } catch (e) {
      log.warn("scheduled audit could not run", { err: e as Error });
    } finally {
      this.#child = null;
    }
    this.runs[result]++;
    this.last = { at: Date.now(), seconds: (Date.now() - started) / 1000, result, findings };
    if (result === "failed") log.error("scheduled audit found records missing or delivered twice", { ...findings });
  }
}
