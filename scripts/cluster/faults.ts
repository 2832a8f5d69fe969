/**
 * Faults on the scale-out profile (`bash scripts/services.sh start cluster`): 3 KRaft brokers, 2
 * ClickHouse replicas of one shard behind a Distributed table, 3 workers in one consumer group.
 * Each scenario streams `records` synthetic CDRs (3 % invalid) at a steady pace over `seconds` into
 * fresh topics made by `topics ensure --replication-factor 3 --partitions 6`, injects its fault
 * mid-stream, then counts as the chaos tests do: every valid record's cdr_id in ClickHouse (on both
 * replicas), every invalid record in the DLQ (distinct by source partition/offset), nothing else;
 * and the duplicate rate, rows stored more than once per valid record.
 *   broker   one broker kill -9'd at 30 % of the stream, started again at 60 %
 *   replica  one ClickHouse replica stopped at 30 %, started again at 60 %
 *   worker   one worker kill -9'd at 30 % while a fourth joins the group
 *   rolling  each worker in turn stopped with SIGTERM and replaced (at 20, 45, 70 %)
 * Usage: bun scripts/cluster/faults.ts [--scenario broker|replica|worker|rolling|all] [--records 100000] [--seconds 12]
 * Prints one JSON report a scenario; exit 1 when a count is off. FAULTS_LOG_LEVEL=debug keeps the
 * workers' debug logs in .local/cluster/faults/<scenario>-<run>/. CI runs every scenario at 100k
 * records (test/cluster/faults.test.ts).
 */
import { createClient } from "@clickhouse/client";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { integerFlag, numberFlag, parseFlags, FLAG } from "../../src/cli/args.ts";
import { SyntheticCdrs } from "../../src/generate/synthetic.ts";
import { Admin } from "../../src/kafka/admin.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { dlqSources } from "../lib/harness.ts";

export const SCENARIOS = ["broker", "replica", "worker", "rolling"] as const;
export type Scenario = (typeof SCENARIOS)[number];

const ROOT = `${import.meta.dir}/../..`;
const MAIN = `${ROOT}/src/main.ts`;
export const BROKERS = "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094";
export const REPLICAS = ["http://127.0.0.1:8124", "http://127.0.0.1:8125"] as const;
const CLUSTER = "cdr_cluster";

export interface FaultReport {
  scenario: Scenario;
  records: number;
  seconds: number;
  valid_produced: number;
  invalid_produced: number;
  /** Distinct cdr_id through the Distributed table, and on each replica's local table. */
  valid_in_clickhouse_distinct: number;
  valid_on_replicas_distinct: number[];
  rows_inserted: number;
  duplicate_rate: number;
  /** Rows beyond one per Kafka offset, and envelopes beyond one per source offset: 0 with exactly-once. */
  rows_twice: number;
  envelopes_twice: number;
  /** `cdr-worker audit` over every partition up to the group's commits: "clean", or its summary. */
  audit: string;
  invalid_in_dlq_distinct: number;
  dlq_messages: number;
  /** The longest time ClickHouse acknowledged no insert while valid records were still to be stored. */
  longest_stall_seconds: number;
  /** Exit codes of the workers stopped with SIGTERM (the rolling restart's and the last ones). */
  sigterm_exit_codes: number[];
  events: { at_s: number; what: string }[];
  /** min.insync.replicas of the raw and DLQ topics as `topics ensure --replication-factor 3` set it. */
  topics_min_insync_replicas: string[];
  ok: boolean;
}

/** `cdr-worker audit` with the scenario's settings: "clean" on exit 0, else its last line (the summary or the error). */
export function runAudit(env: Record<string, string | undefined>): string {
  const p = Bun.spawnSync(["bun", MAIN, "audit"], { env: { ...env, LOG_LEVEL: "warn" }, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const last = `${p.stdout}`.trim().split("\n").at(-1) ?? "";
  return p.exitCode === 0 && last.includes('"audit":"clean"') ? "clean" : `exit ${p.exitCode}: ${last} ${`${p.stderr}`.slice(-500)}`;
}

/** Runs a command of the project; throws with its output when it fails. */
function sh(cmd: string[], env: Record<string, string | undefined> = process.env): string {
  const p = Bun.spawnSync(cmd, { env, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} exited ${p.exitCode}: ${p.stderr}${p.stdout}`);
  return p.stdout.toString();
}

/** The same without blocking the event loop: the stream and the sampler go on while a fault is made. */
async function shAsync(cmd: string[]): Promise<void> {
  const p = Bun.spawn(cmd, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${err}${out}`);
}

/** Polls `probe` every `everyMs` until it returns a value; throws naming `what` after `ms`. */
async function until<T>(probe: () => Promise<T | undefined> | T | undefined, ms: number, what: string, everyMs = 100): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(everyMs);
  }
}

/** The stacks a core file holds, the crashing thread's first (gdb): what a CI log can show of a crash. */
function crashStacks(core: string): string {
  const bun = Bun.which("bun") ?? "bun";
  const gdb = Bun.spawnSync(["gdb", "-batch", "-ex", "bt 24", "-ex", "thread apply all bt 8", bun, core], {
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  rmSync(core, { force: true }); // as large as the worker was: read once, then gone
  const lines = `${gdb.stdout}`.split("\n").filter((l) => /^(#|Thread |Program terminated)/.test(l));
  return lines.slice(0, 120).join("\n") || `(gdb read nothing: ${`${gdb.stderr}`.slice(0, 300)})`;
}

class Workers {
  readonly live = new Map<string, Bun.Subprocess>();
  readonly #dirs = new Map<number, string>();
  readonly #acknowledged = new Map<string, number>();
  readonly #ports = new Map<string, number>();
  #port = 18400 + Math.floor(Math.random() * 500);
  constructor(readonly env: Record<string, string>, readonly logDir: string) {}

  /** Starts worker `name` and waits until it is ready (partitions assigned, ClickHouse answering). */
  async start(name: string, waitReady = true): Promise<void> {
    const port = this.#port++;
    // A worker that dies by a signal of its own (SIGSEGV) leaves a core in a directory of its own,
    // which `ended` reads with gdb: the failure then shows where it crashed (no core, no stack).
    const dir = `${this.logDir}/${name}`;
    mkdirSync(dir, { recursive: true });
    const proc = Bun.spawn(["bash", "-c", 'ulimit -c unlimited 2>/dev/null; exec "$@"', "worker", "bun", MAIN, "run"], {
      env: { ...this.env, WORKER_INSTANCE: name, STATS_PORT: String(port), CORE_DUMPS: "on" },
      cwd: dir,
      stdin: "ignore",
      stdout: "ignore",
      stderr: Bun.file(`${this.logDir}/${name}.log`),
    });
    this.#dirs.set(proc.pid, dir);
    this.live.set(name, proc);
    this.#ports.set(name, port);
    if (waitReady) await this.ready(name);
  }

  url(name: string): string {
    return `http://127.0.0.1:${this.#ports.get(name)}`;
  }

  async ready(name: string): Promise<void> {
    await until(async () => {
      const proc = this.live.get(name)!;
      if (proc.killed || proc.exitCode !== null) throw new Error(`worker ${name} ${this.ended(proc)}: ${this.logTail(name)}`);
      const r = await fetch(`${this.url(name)}/readyz`).catch(() => null);
      return r?.status === 200 ? true : undefined;
    }, 60_000, `worker ${name} ready`);
  }

  async stop(name: string, signal: "SIGTERM" | "SIGKILL"): Promise<number> {
    const proc = this.live.get(name)!;
    proc.kill(signal);
    const code = await proc.exited;
    this.live.delete(name);
    return code;
  }

  /** Rows ClickHouse acknowledged to any worker so far (a stopped worker's last known count). */
  async acknowledgedRows(): Promise<number> {
    for (const [name, proc] of this.live) {
      const s = await fetch(`${this.url(name)}/internal/stats`)
        .then((r) => r.json() as Promise<Record<string, any>>)
        .catch(() => null);
      if (s && !proc.killed && proc.exitCode === null) this.#acknowledged.set(name, s.total_clickhouse as number);
    }
    return [...this.#acknowledged.values()].reduce((a, b) => a + b, 0);
  }

  /** Each live worker's last answer to `pending`: what a timeout reports, so that it says which partition held. */
  lastPending: Record<string, unknown> = {};

  /** Sum of every live worker's partition lag and buffered records. */
  async pending(): Promise<number> {
    let sum = 0;
    for (const [name, proc] of this.live) {
      if (proc.killed || proc.exitCode !== null) throw new Error(`worker ${name} ${this.ended(proc)}: ${this.logTail(name)}`);
      const answer = await fetch(`${this.url(name)}/internal/stats`).catch((e: Error) => {
        throw new Error(`worker ${name} (pid ${proc.pid}) does not answer: ${e.message}`);
      });
      const s = (await answer.json()) as Record<string, any>;
      const lagging = Object.entries(s.partitions as Record<string, { lag: number }>).filter(([, p]) => p.lag > 0);
      this.lastPending[name] = { ...s, partitions: Object.fromEntries(lagging) };
      sum += s.in_flight_buffer + lagging.reduce((a, [, p]) => a + p.lag, 0);
    }
    return sum;
  }

  /** How a worker ended: its exit code, or the signal that ended it (which leaves exitCode null), with where it crashed. */
  ended(proc: Bun.Subprocess): string {
    if (!proc.signalCode) return `exited ${proc.exitCode}`;
    const dir = this.#dirs.get(proc.pid);
    const core = dir && ["SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL"].includes(String(proc.signalCode)) ? `${dir}/core` : null;
    return `was ended by ${proc.signalCode}${core && existsSync(core) ? `; its threads at the crash:\n${crashStacks(core)}` : ""}`;
  }

  logTail(name: string): string {
    try {
      return readFileSync(`${this.logDir}/${name}.log`, "utf8").split("\n").slice(-15).join("\n");
    } catch {
      return "(no log)";
    }
  }

  /**
   * Each live worker's state and threads' stacks, written next to its log: what a worker that
   * stopped answering was doing (its log may hold nothing since, a blocked event loop logs nothing).
   */
  snapshotStacks(): void {
    for (const [name, proc] of this.live) {
      const state = (() => {
        try {
          return readFileSync(`/proc/${proc.pid}/status`, "utf8").match(/^State:.*$/m)?.[0] ?? "?";
        } catch {
          return "gone";
        }
      })();
      let stacks: string;
      try {
        const gdb = Bun.spawnSync(["gdb", "-p", String(proc.pid), "-batch", "-ex", "thread apply all bt 12"], {
          stdout: "pipe",
          stderr: "pipe",
          timeout: 30_000,
        });
        stacks = `${gdb.stdout}${gdb.stderr}`;
      } catch (e) {
        stacks = `no stacks: ${(e as Error).message}`; // the failure itself is what the caller reports
      }
      Bun.write(`${this.logDir}/${name}.stacks`, `exitCode ${proc.exitCode}; ${state}\n${stacks}`);
    }
  }

  killAll(): void {
    for (const p of this.live.values()) p.kill("SIGKILL");
    this.live.clear();
  }
}

export async function runFault(scenario: Scenario, opts: { records: number; seconds: number }): Promise<FaultReport> {
  const stamp = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`;
  const raw = `faults-${scenario}.raw.${stamp}`, dlq = `faults-${scenario}.dlq.${stamp}`;
  const database = `faults_${scenario}_${stamp}`;
  const logDir = `${ROOT}/.local/cluster/faults/${scenario}-${stamp}`;
  mkdirSync(logDir, { recursive: true });
  const env: Record<string, string> = {
    PATH: process.env.PATH!,
    KAFKA_BROKERS: BROKERS,
    KAFKA_TOPIC_RAW: raw,
    KAFKA_TOPIC_DLQ: dlq,
    KAFKA_GROUP_ID: `faults-${scenario}-${stamp}`,
    // Exactly-once's default: envelopes signed (the key every worker of the group shares).
    DLQ_PROVENANCE_KEY: "faults-provenance-key-0123456789abcdef0123",
    CLICKHOUSE_URL: REPLICAS.join(","),
    CLICKHOUSE_DATABASE: database,
    CLICKHOUSE_TABLE: "cdr",
    STATS_HOST: "127.0.0.1",
    LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? "warn",
    BATCH_FLUSH_INTERVAL_SECONDS: "0.5",
    BUN_JSC_forceRAMSize: "1073741824",
    // DELIVERY=at-least-once compares a scenario without the replay check (exactly-once by default).
    ...(process.env.DELIVERY ? { DELIVERY: process.env.DELIVERY } : {}),
    // A member killed with -9 holds its partitions until its session ends: 6 s (the broker's
    // minimum) instead of 45 s keeps that run short. The other scenarios keep the default, which
    // is what rides out a group coordinator moving to another broker.
    ...(scenario === "worker" ? { KAFKA_PROP_SESSION_TIMEOUT_MS: "6000" } : {}),
  };
  sh(["bun", MAIN, "topics", "ensure", "--replication-factor", "3", "--partitions", "6"], env);
  const described = sh(["bun", MAIN, "topics", "describe"], env).trim().split("\n").map((l) => JSON.parse(l));
  const minInsync = described.map((t) => t.configs?.["min.insync.replicas"] as string);
  sh(["bun", MAIN, "migrate", "--cluster", CLUSTER], env);
  // The topics must serve all six partitions on the three brokers before workers join.
  sh(["bash", "-c", `for i in $(seq 100); do [[ $(kcat -b ${BROKERS} -L -t ${raw} 2>/dev/null | grep -c 'isrs: .,.,.') == 6 ]] && exit 0; sleep 0.1; done; exit 1`]);

  // No merges during the run: ReplacingMergeTree would collapse replays before they are counted,
  // and the duplicate rate must say what the workers inserted (identical retried blocks are still
  // dropped by the replicated table's insert deduplication: those are not stored twice).
  for (const url of REPLICAS) sh(["curl", "-fsS", url, "--data-binary", `SYSTEM STOP MERGES ${database}.cdr_local`]);
  const survivor = createClient({ url: REPLICAS[1], request_timeout: 30_000 });
  const rows = async (table = "cdr", client = survivor) => {
    const rs = await client.query({ query: `SELECT count() AS c, uniqExact(cdr_id) AS u, uniqExact(kafka_partition, kafka_offset) AS o FROM ${database}.${table}`, format: "JSONEachRow" });
    const [r] = await rs.json<{ c: string; u: string; o: string }>();
    return { count: Number(r!.c), distinct: Number(r!.u), offsets: Number(r!.o) };
  };

  const workers = new Workers(env, logDir);
  const t0 = performance.now();
  const events: FaultReport["events"] = [];
  const event = (what: string) => events.push({ at_s: +((performance.now() - t0) / 1000).toFixed(1), what });
  const sigtermCodes: number[] = [];
  let sent = 0, valid = 0, streamDone = false;
  let longestStall = 0;
  let sampling = true;
  try {
    await Promise.all(["w1", "w2", "w3"].map((w) => workers.start(w)));
    event("3 workers ready");

    const stream = (async () => {
      const gen = new SyntheticCdrs({ seed: 7, invalidShare: 0.03, idPrefix: `f${stamp}` });
      const p = new Producer({ "bootstrap.servers": BROKERS, "linger.ms": "20", "compression.type": "lz4" });
      const s0 = performance.now();
      try {
        const chunk = 1000;
        while (sent < opts.records) {
          const n = Math.min(chunk, opts.records - sent);
          const values = Array.from({ length: n }, () => {
            const r = gen.next();
            if (!r.defect) valid++;
            return r.text;
          });
          await p.produceBatch(raw, values);
          sent += n;
          const due = s0 + (sent / opts.records) * opts.seconds * 1000;
          if (due > performance.now()) await Bun.sleep(due - performance.now());
        }
      } finally {
        p.close();
        streamDone = true;
        event(`stream of ${opts.records} sent`);
      }
    })();
    const at = (share: number) => until(() => (sent >= share * opts.records ? true : undefined), 600_000, `${share * 100} % sent`, 20);

    // Progress sampler: the longest stretch in which ClickHouse acknowledged no insert while valid
    // records were still missing. Counted from the workers (rows they were acknowledged for), not
    // by reading one replica: rows a replica acknowledged reach the other only when it fetches them.
    const sampler = (async () => {
      let last = -1, since = performance.now();
      while (sampling) {
        const d = await workers.acknowledgedRows();
        if (d !== last || (streamDone && d >= valid)) {
          last = d;
          since = performance.now();
        }
        longestStall = Math.max(longestStall, (performance.now() - since) / 1000);
        await Bun.sleep(250);
      }
    })();

    // A service taken away at 30 % of the stream and brought back at 60 %, each step logged.
    const outage = async (what: string, down: string[], done: string, up: string[], back: string) => {
      await at(0.3);
      event(what);
      await shAsync(down);
      event(done);
      await at(0.6);
      await shAsync(up);
      event(back);
    };
    const faults = (async () => {
      switch (scenario) {
        case "broker": {
          const script = "scripts/cluster/kafka-brokers.sh";
          await outage("killing broker 1", ["bash", script, "kill", "1"], "broker 1 killed (kill -9)",
            ["bash", script, "start", "1"], "broker 1 serving again"); // prettier-ignore
          break;
        }
        case "replica": {
          // A graceful stop (SIGTERM, kill -9 after 30 s, as a service manager does).
          const script = "scripts/cluster/clickhouse-replicas.sh";
          await outage("stopping replica r1", ["bash", script, "stop", "r1"], "replica r1 stopped",
            ["bash", script, "start"], "replica r1 answering again"); // prettier-ignore
          break;
        }
        case "worker":
          await at(0.3);
          await workers.stop("w1", "SIGKILL");
          event("worker w1 killed (kill -9)");
          await workers.start("w4");
          event("worker w4 joined and ready");
          break;
        case "rolling":
          for (const [i, name] of ["w1", "w2", "w3"].entries()) {
            await at(0.2 + 0.25 * i);
            sigtermCodes.push(await workers.stop(name, "SIGTERM"));
            event(`worker ${name} stopped (SIGTERM)`);
            await workers.start(`${name}b`);
            event(`worker ${name}b ready`);
          }
          break;
      }
    })();
    await Promise.all([stream, faults]);

    const invalid = opts.records - valid;
    // A count that times out (a loaded machine, the replica merging parts in) is asked again.
    await until(async () => ((await rows().catch(() => null))?.distinct ?? -1) >= valid || undefined, 300_000, `${valid} valid rows`, 250);
    await until(async () => ((await workers.pending()) === 0 ? true : undefined), 120_000, "every worker caught up", 250)
      .catch((e: Error) => {
        throw new Error(`${e.message}; still pending: ${JSON.stringify(workers.lastPending)}`);
      });
    event("every valid record stored, no lag");
    sampling = false;
    await sampler;
    for (const name of [...workers.live.keys()]) sigtermCodes.push(await workers.stop(name, "SIGTERM"));

    // Each replica holds every row once replication has caught up (fetches run; merges do not).
    const onReplicas: number[] = [];
    for (const url of REPLICAS) {
      const ch = createClient({ url, request_timeout: 60_000 });
      try {
        // Polled, not SYSTEM SYNC REPLICA: that waits for merges too, which are stopped.
        const caughtUp = until(async () => {
          const d = (await rows("cdr_local", ch).catch(() => null))?.distinct ?? -1;
          return d >= valid ? d : undefined;
        }, 120_000, `every row on ${url}`, 250);
        onReplicas.push(
          await caughtUp.catch(async (e) => {
            // What the replica still waits for, so that a replica that never catches up says why.
            const rs = await ch.query({
              query: `SELECT type, new_part_name, num_tries, last_exception FROM system.replication_queue WHERE database = '${database}' LIMIT 5`,
              format: "JSONEachRow",
            });
            throw new Error(`${(e as Error).message}; its replication queue: ${JSON.stringify(await rs.json())}`);
          }),
        );
      } finally {
        await ch.close();
      }
    }
    const final = await rows();
    const dlqRead = await dlqSources(BROKERS, dlq, `faults-reader-${stamp}`);
    const audit = runAudit(env);
    const report: FaultReport = {
      scenario,
      records: opts.records,
      seconds: +((performance.now() - t0) / 1000).toFixed(1),
      valid_produced: valid,
      invalid_produced: invalid,
      valid_in_clickhouse_distinct: final.distinct,
      valid_on_replicas_distinct: onReplicas,
      rows_inserted: final.count,
      duplicate_rate: +((final.count - final.distinct) / valid).toFixed(5),
      rows_twice: final.count - final.offsets,
      envelopes_twice: dlqRead.messages - dlqRead.sources.size,
      audit,
      invalid_in_dlq_distinct: dlqRead.sources.size,
      dlq_messages: dlqRead.messages,
      longest_stall_seconds: +longestStall.toFixed(1),
      sigterm_exit_codes: sigtermCodes,
      events,
      topics_min_insync_replicas: minInsync,
      ok: false,
    };
    report.ok =
      minInsync.every((m) => m === "2") &&
      final.distinct === valid &&
      onReplicas.every((d) => d === valid) &&
      dlqRead.sources.size === invalid &&
      audit === "clean" &&
      sigtermCodes.every((c) => c === 0);
    return report;
  } catch (e) {
    workers.snapshotStacks();
    const tails = [...workers.live.keys()].map((n) => `--- ${n}\n${workers.logTail(n)}`).join("\n");
    throw new Error(`${scenario}: ${(e as Error).message}\nevents: ${JSON.stringify(events)}\n${tails}`);
  } finally {
    sampling = false;
    workers.killAll();
    await survivor.command({ query: `DROP DATABASE IF EXISTS ${database} ON CLUSTER ${CLUSTER}` }).catch(() => {});
    await survivor.close();
    const admin = new Admin({ "bootstrap.servers": BROKERS });
    await admin.deleteTopics([raw, dlq]).catch(() => {});
    admin.close();
  }
}

if (import.meta.main) {
  const args = parseFlags(process.argv.slice(2), { scenario: FLAG.value, records: FLAG.value, seconds: FLAG.value }, "faults");
  const which = String(args.flags.get("scenario") ?? "all");
  const scenarios = which === "all" ? [...SCENARIOS] : [which as Scenario];
  if (!scenarios.every((s) => SCENARIOS.includes(s))) {
    console.error(`--scenario: one of ${SCENARIOS.join(", ")}, all`);
    process.exit(2);
  }
  const records = integerFlag(args, "records", 100_000, 1000, 1e8);
  const seconds = numberFlag(args, "seconds", 12, 1, 3600);
  let ok = true;
  for (const s of scenarios) {
    const report = await runFault(s, { records, seconds });
    console.log(JSON.stringify(report));
    ok &&= report.ok;
  }
  process.exit(ok ? 0 : 1);
}
