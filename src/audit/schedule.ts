/**
 * The audit on a schedule (AUDIT_INTERVAL_SECONDS), run by a worker as a child process of its own
 * executable: the audit reads a whole topic range and blocks on Kafka calls, which the worker's
 * loop must not wait for. Each run covers the records of the last two intervals (so consecutive
 * runs overlap) up to the group's committed offset; its summary line is kept for stats and
 * metrics. A run still going when the next is due is not doubled.
 */
import { log } from "../log.ts";
import type { Finding } from "./reconcile.ts";

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

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
    this.#timer = setInterval(() => {
      this.#running ??= this.#run().finally(() => (this.#running = null));
    }, intervalMs);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #run(): Promise<void> {
    const started = Date.now();
    const since = new Date(started - 2 * this.#intervalMs).toISOString();
    let result: AuditResult["result"] = "error";
    let findings: AuditResult["findings"] = null;
    try {
      const child = Bun.spawn([...self(), "audit", "--since", since], {
        env: { ...process.env, LOG_LEVEL: "warn" },
        stdout: "pipe",
        stderr: "pipe",
      });
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
      } else log.warn("scheduled audit could not run", { exit_code: code, stderr: err.trim().slice(-2000) });
    } catch (e) {
      log.warn("scheduled audit could not run", { err: e as Error });
    }
    this.runs[result]++;
    this.last = { at: Date.now(), seconds: (Date.now() - started) / 1000, result, findings };
    if (result === "failed") log.error("scheduled audit found records missing or delivered twice", { ...findings });
  }
}
