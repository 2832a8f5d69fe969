/** A process's peak resident memory, as the kernel keeps it (VmHWM), sampled until stopped. */
import { readFileSync } from "node:fs";

/** VmHWM of `pid` in bytes; 0 once the process is gone. */
export function peakRssOf(pid: number): number {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** Samples `pid`'s peak every 100 ms; `stop()` ends it and returns the highest seen. */
export function samplePeakRss(pid: number): { stop: () => number } {
  let peak = 0;
  const timer = setInterval(() => (peak = Math.max(peak, peakRssOf(pid))), 100);
  return { stop: () => (clearInterval(timer), Math.max(peak, peakRssOf(pid))) };
}
