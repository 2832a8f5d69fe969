// The scheduled audit is a child process of its worker: it must end when the worker ends, however
// the worker ends. SIGKILL gives the worker no chance to stop it, so the child asks the kernel to
// end it with its parent (PR_SET_PDEATHSIG) when CDR_WORKER_PARENT_PID names its parent.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { PARENT_PID_VARIABLE } from "../../src/audit/schedule.ts";
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
