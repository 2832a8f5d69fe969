// What the worker does when the broker refuses it: librdkafka hands a group error over as a message
// with no topic handle (rkt = NULL). Reading a topic name through it was a segfault, with a core
// that could hold credentials and CDRs; the worker now exits 1 with a line that names the refusal.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { freshNames, killLeftoverWorkers, workerEnv } from "../support/worker.ts";
import { KAFKA_BROKERS, KAFKA_SASL_BROKERS, ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);
afterAll(killLeftoverWorkers);

/** Kafka's own ACL tool, as an operator runs it, through the super user's listener. */
async function denyGroup(principal: string, group: string): Promise<void> {
  const proc = Bun.spawn(
    ["java", "-cp", `${ROOT}/.local/kafka/libs/*`, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", KAFKA_BROKERS,
      "--add", "--deny-principal", principal, "--operation", "All", "--group", group],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(`${code} ${out.includes(group)}`).toBe("0 true");
}

test("regression: a group the client may not use stops the worker with exit 1 and one line naming GROUP_AUTHORIZATION_FAILED, not a signal", async () => {
  const n = await freshNames("denied");
  await denyGroup("User:cdr", n.group);
  const env = workerEnv(n, {
    KAFKA_BROKERS: KAFKA_SASL_BROKERS,
    KAFKA_PROP_SECURITY_PROTOCOL: "SASL_PLAINTEXT",
    KAFKA_PROP_SASL_MECHANISM: "PLAIN",
    KAFKA_PROP_SASL_USERNAME: "cdr",
    KAFKA_PROP_SASL_PASSWORD: "cdr-test-secret",
  });
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 45_000);
  const [logs, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  expect({ code, signal: proc.signalCode }).toEqual({ code: 1, signal: null });
  const refused = logs.split("\n").filter((l) => l.includes('"level":"error"') && l.includes("GROUP_AUTHORIZATION_FAILED"));
  expect(refused.length).toBeGreaterThan(0);
  expect(logs).not.toContain("cdr-test-secret");
});
