/** The Prometheus text exposition format (0.0.4): samples written as lines, for any process's /metrics. */
import type { Histogram } from "./counters.ts";

const esc = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');

/** Writes samples in the exposition format. */
export class Exposition {
  readonly lines: string[] = [];

  readonly metric = (
    name: string,
    type: string,
    help: string,
    samples: Array<[Record<string, string | number>, number]>,
  ): void => {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const l = Object.entries(labels)
        .map(([k, v]) => `${k}="${esc(String(v))}"`)
        .join(",");
      this.lines.push(`${name}${l ? `{${l}}` : ""} ${value}`);
    }
  };

  readonly histogram = (name: string, help: string, h: Histogram): void => {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
    h.bounds.forEach((b, i) => this.lines.push(`${name}_bucket{le="${b}"} ${h.counts[i]}`));
    this.lines.push(`${name}_bucket{le="+Inf"} ${h.count}`, `${name}_sum ${h.sum}`, `${name}_count ${h.count}`);
  };
}
