// What the worker does when the broker refuses it: librdkafka hands a group error over as a message
// with no topic handle (rkt = NULL). Reading a topic name through it was a segfault, with a core
// that could hold credentials and CDRs; the worker now exits 1 with a line that names the refusal.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { freshNames, killLeftoverWorkers, workerEnv } from "../support/worker.ts";
import { KAFKA_BROKERS, KAFKA_SASL_BROKERS, ROOT, uniqueName } from "../support/services.ts";
import { Admin } from "../../src/kafka/admin.ts";
import { KafkaError } from "../../src/errors.ts";

setDefaultTimeout(60_000);
afterAll(killLeftoverWorkers);

/** Kafka's own ACL tool, as an operator runs it, through the super user's listener. */
async function deny(principal: string, resource: "--group" | "--transactional-id", name: string): Promise<void> {
  const proc = Bun.spawn(
    ["java", "-cp", `${ROOT}/.local/kafka/libs/*`, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", KAFKA_BROKERS,
      "--add", "--deny-principal", principal, "--operation", "All", resource, name],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(`${code} ${out.includes(name)}`).toBe("0 true");
}
const denyGroup = (principal: string, group: string) => deny(principal, "--group", group);

const SASL = {
  KAFKA_BROKERS: KAFKA_SASL_BROKERS,
  KAFKA_PROP_SECURITY_PROTOCOL: "SASL_PLAINTEXT",
  KAFKA_PROP_SASL_MECHANISM: "PLAIN",
  KAFKA_PROP_SASL_USERNAME: "cdr",
  KAFKA_PROP_SASL_PASSWORD: "cdr-test-secret",
};

/** `run` as the SASL user until it exits by itself: its exit and its log. */
async function runUntilExit(env: Record<string, string>): Promise<{ code: number | null; signal: unknown; logs: string }> {
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "run"], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 45_000);
  const [logs, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, signal: proc.signalCode, logs };
}

test("regression: a group the client may not use stops the worker with exit 1 and one line naming GROUP_AUTHORIZATION_FAILED, not a signal", async () => {
  const n = await freshNames("denied");
  await denyGroup("User:cdr", n.group);
  const { code, signal, logs } = await runUntilExit(workerEnv(n, SASL));
  expect({ code, signal }).toEqual({ code: 1, signal: null });
  const refused = logs.split("\n").filter((l) => l.includes('"level":"error"') && l.includes("GROUP_AUTHORIZATION_FAILED"));
  expect(refused.length).toBeGreaterThan(0);
  expect(logs).not.toContain("cdr-test-secret");
});

// Exactly-once's DLQ producer is transactional: its principal needs Write and Describe on the
// TransactionalId <group>-<WORKER_INSTANCE> (docs/security.md). Without them the worker stops at
// start, before it consumes anything, with one line that names the refusal.
test("exactly-once without the TransactionalId ACL: exit 1 and one line naming TRANSACTIONAL_ID_AUTHORIZATION_FAILED", async () => {
  const n = await freshNames("txn-denied");
  const env = workerEnv(n, { ...SASL, WORKER_INSTANCE: "txn-denied" });
  await deny("User:cdr", "--transactional-id", `${n.group}-txn-denied`);
  const { code, signal, logs } = await runUntilExit(env);
  expect({ code, signal }).toEqual({ code: 1, signal: null });
  const refused = logs.split("\n").filter((l) => l.includes('"level":"error"') && l.includes("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"));
  expect(refused.length).toBeGreaterThan(0);
  expect(logs).not.toContain("partitions assigned");
});

// The replay check reads the group's commits by the admin API: a refusal there must say so and be
// final (the check stops the worker on it), not be retried with the partitions paused for ever.
test("the admin API's committed offsets of a group the client may not use: GROUP_AUTHORIZATION_FAILED, not retryable", async () => {
  const group = uniqueName("denied-admin");
  await denyGroup("User:cdr", group);
  const admin = new Admin({
    "bootstrap.servers": KAFKA_SASL_BROKERS,
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "cdr",
    "sasl.password": "cdr-test-secret",
  });
  try {
    const err = await admin.committed(group, [{ topic: uniqueName("any"), partition: 0 }]).then(
      () => null,
      (e: unknown) => e as KafkaError,
    );
    expect(err).toBeInstanceOf(KafkaError);
    expect({ name: err!.kafkaName, retryable: err!.retryable }).toEqual({ name: "GROUP_AUTHORIZATION_FAILED", retryable: false });
    expect(err!.message).toContain(group);
  } finally {
    admin.close();
  }
});

// Under group.protocol=consumer the session is the broker's, and the exactly-once lease is measured
// against it: read by DescribeConfigs on the group at start. Without that ACL the worker cannot
// know how long its membership holds, so it stops at once with one line that says what to grant.
test("exactly-once under group.protocol=consumer without DescribeConfigs on the group: exit 1 and one line naming the grant", async () => {
  const n = await freshNames("session-denied");
  await denyGroup("User:cdr", n.group);
  const { code, signal, logs } = await runUntilExit(workerEnv(n, { ...SASL, KAFKA_PROP_GROUP_PROTOCOL: "consumer" }));
  expect({ code, signal }).toEqual({ code: 1, signal: null });
  const line = logs.split("\n").find((l) => l.includes(`grant DescribeConfigs on group ${n.group}`));
  expect(line).toBeDefined();
  expect(logs).not.toContain("partitions assigned");
});
