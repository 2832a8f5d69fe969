/**
 * A network partition between one process and the Kafka broker, on one machine: the process runs in a
 * cgroup v2 group of its own, and iptables drops what that group sends to the broker's port, while
 * every other process (the other workers, the test) still reaches it, and the cut one still reaches
 * ClickHouse. Dropped, not refused: the cut process sees silence, as across a failed switch. A
 * socket belongs to the group its process was in when it was made, so the process starts in the
 * group (`command`): one moved there later keeps its connections to the broker.
 */
import { mkdirSync, rmdirSync, writeFileSync } from "node:fs";
import { run, uniqueName } from "./services.ts";

/** The cgroup v2 hierarchy of this machine's hybrid layout (the v1 controllers sit beside it). */
const UNIFIED = "/sys/fs/cgroup/unified";

export class KafkaCut {
  readonly #group = uniqueName("cdrcut");
  readonly #port: number;
  #rule: string[] | null = null;

  /** `port`: the broker's port, as KAFKA_BROKERS names it. */
  constructor(port: number) {
    this.#port = port;
  }

  /** `cmd`, run inside the group: it joins the group, then becomes the command. */
  command(cmd: readonly string[]): string[] {
    mkdirSync(`${UNIFIED}/${this.#group}`, { recursive: true });
    const quoted = cmd.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
    return ["sh", "-c", `echo $$ > ${UNIFIED}/${this.#group}/cgroup.procs && exec ${quoted}`];
  }

  /** Cuts every process of the group (all their threads: librdkafka's too) off from the broker. */
  async cut(): Promise<void> {
    this.#rule = ["OUTPUT", "-p", "tcp", "--dport", String(this.#port), "-m", "cgroup", "--path", this.#group, "-j", "DROP"];
    await run(["iptables", "-I", ...this.#rule]);
  }

  /** Lets the process reach the broker again. */
  async heal(): Promise<void> {
    if (!this.#rule) return;
    await run(["iptables", "-D", ...this.#rule]);
    this.#rule = null;
  }

  /** Heals, moves what is left in the group back to the root group, and removes the group. */
  async remove(pids: readonly number[]): Promise<void> {
    await this.heal().catch(() => {});
    for (const pid of pids) {
      try {
        writeFileSync(`${UNIFIED}/cgroup.procs`, String(pid));
      } catch {
        // gone already
      }
    }
    try {
      rmdirSync(`${UNIFIED}/${this.#group}`);
    } catch {
      // never made, or a process still in it has exited since
    }
  }
}
