// The scheduled audit is a child process of its worker: it must end when the worker ends, however
// the worker ends. SIGKILL gives the worker no chance to stop it, so the child asks the kernel to
// end it with its parent (PR_SET_PDEATHSIG) when CDR_WORKER_PARENT_PID names its parent.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { AuditSchedule, PARENT_PID_VARIABLE } from "../../src/audit/schedule.ts";
import { ROOT, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("an audit started by a worker ends when the worker is killed with SIGKILL", async () => {
  // The parent stands in for the worker; the audit blocks on a broker that never answers, as a long
  // audit blocks on a big topic.
  const parent = Bun.spawn(
    ["bash", "-c", `${PARENT_PID_VARIABLE}=$$ ${process.execPath} ${ROOT}/src/main.ts audit & echo $!; wait`],
    { env: { PATH: process.env.PATH!, KAFKA_BROKERS: "127.0.0.1:1", LOG_LEVEL: "error" }, stdout: "pipe", stderr: "ignore" },
  );
  const reader = parent.stdout.getReader();
  const child = Number(new TextDecoder().decode((await reader.read()).value).trim());
  expect(child).toBeGreaterThan(1);
  // Past its start: librdkafka's threads run (the ask to the kernel comes before its first Kafka call).
  const kafkaThreads = () => {
    try {
      return readdirSync(`/proc/${child}/task`).some((t) => readFileSync(`/proc/${child}/task/${t}/comm`, "utf8").startsWith("rdk:"));
    } catch {
      return false;
    }
  };
  await waitFor(() => (kafkaThreads() ? true : undefined), 20_000, "the audit calling Kafka");
  expect(alive(child)).toBe(true);
  parent.kill("SIGKILL");
  await parent.exited;
  await waitFor(() => (alive(child) ? undefined : true), 5000, "the audit ended with its parent");
});

// One worker of a group audits: the owner of partition 0. The child is a stand-in that prints an
// audit's summary line, so the test sees when the schedule runs one and what it keeps of it.
function fakeAudit(missing: number) {
  const calls: string[][] = [];
  const spawn = ((cmd: string[]) => {
    calls.push(cmd);
    const summary = JSON.stringify({ audit: missing ? "failed" : "clean", missing, stored_twice: 0, dead_lettered_twice: 0, stored_and_dead_lettered: 0, not_a_record: 0 });
    return { stdout: new Blob([`${summary}\n`]).stream(), stderr: new Blob([]).stream(), exited: Promise.resolve(missing ? 1 : 0), kill() {} };
  }) as unknown as typeof Bun.spawn;
  return { calls, spawn };
}

test("a worker that does not own partition 0 runs no audit; one that stops owning it stops exporting findings", async () => {
  let owner = false;
  let ticks = 0;
  const { calls, spawn } = fakeAudit(3);
  const schedule = new AuditSchedule(20, { due: () => (ticks++, owner), spawn });
  // Absence is seen over ticks of the schedule, not over a wall-clock sleep.
  const tickedTimes = async (n: number) => {
    const from = ticks;
    await waitFor(() => (ticks >= from + n ? true : undefined), 5000, `${n} ticks`);
  };
  try {
    await tickedTimes(5);
    expect({ calls: calls.length, last: schedule.last }).toEqual({ calls: 0, last: null });
    owner = true;
    await waitFor(() => (schedule.last?.findings ? true : undefined), 5000, "an audit run by the owner");
    expect(calls[0]).toContain("audit");
    expect(schedule.last).toMatchObject({ result: "failed", findings: { missing: 3 } });
    owner = false;
    await waitFor(() => (schedule.last?.findings === null ? true : undefined), 5000, "the findings dropped");
    const runs = calls.length;
    await tickedTimes(5);
    expect({ calls: calls.length, result: schedule.last?.result }).toEqual({ calls: runs, result: "failed" });
  } finally {
    schedule.stop();
  }
});
