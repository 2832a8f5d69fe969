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

/**
 * Kafka's own ACL tool, as an operator runs it, through the super user's listener. The broker lets
 * everyone do anything with a resource no ACL names; once one does, only what is allowed is.
 */
async function deny(
  principal: string,
  resource: "--group" | "--transactional-id" | "--topic",
  name: string,
  { operation = "All", prefixed = false, allow = false } = {},
): Promise<void> {
  const proc = Bun.spawn(
    ["java", "-cp", `${ROOT}/.local/kafka/libs/*`, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", KAFKA_BROKERS,
      "--add", allow ? "--allow-principal" : "--deny-principal", principal, "--operation", operation, resource, name,
      ...(prefixed ? ["--resource-pattern-type", "prefixed"] : [])],
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

/** `check` as the SASL user: its exit, its problem and warning lines, its summary. */
function check(env: Record<string, string>) {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, "check"], { env: { ...env, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
  // Its problem and warning lines; the JSON lines are the log's (the retention it could not read).
  const lines = `${p.stderr}`.trim().split("\n").filter((l) => l && !l.startsWith("{"));
  return { code: p.exitCode, lines, summary: JSON.parse(`${p.stdout}`) };
}

// `check` reads the ACLs `run` needs from the broker (the authorized operations of each topic and
// group, and an InitProducerId under the workers' TransactionalId prefix): each refusal is a line
// naming what to grant, and the exit is the one `run` gives on it.
test("check names each Kafka grant run lacks: a group it may not join, the TransactionalId prefix; DescribeConfigs is a warning", async () => {
  const key = { DLQ_PROVENANCE_KEY: "k".repeat(64) };
  const n = await freshNames("check-acl");
  const granted = check(workerEnv(n, { ...SASL, ...key }));
  expect({ code: granted.code, lines: granted.lines }).toEqual({ code: 0, lines: [] });
  expect(granted.summary.kafka.passed).toBe(true);

  // Everything on the raw topic but DescribeConfigs (a deny wins over an allow).
  await deny("User:cdr", "--topic", n.raw, { allow: true });
  await deny("User:cdr", "--topic", n.raw, { operation: "DescribeConfigs" });
  const weaker = check(workerEnv(n, { ...SASL, ...key }));
  expect(weaker.code).toBe(0);
  expect(weaker.lines).toEqual([expect.stringMatching(new RegExp(`^warning: the client may not describe configs topic ${n.raw.replaceAll(".", "\\.")}, which run needs to compare lag`))]);

  await denyGroup("User:cdr", n.group);
  await deny("User:cdr", "--transactional-id", `${n.group}-`, { prefixed: true });
  const refused = check(workerEnv(n, { ...SASL, ...key }));
  expect(refused.code).toBe(1);
  const errors = refused.lines.filter((l) => l.startsWith("error KAFKA_ACCESS"));
  expect(errors).toEqual([
    expect.stringContaining(`the client may not read group ${n.group}, which run needs to join the group and commit its offsets`),
    expect.stringContaining(`the client may not write TransactionalId ${n.group}-`),
  ]);
  expect(errors[1]).toContain(`grant Write and Describe on the prefix ${n.group}-`);
  expect(refused.summary).toMatchObject({ check: "failed", exit: 1, kafka: { passed: false } });
  // run stops on the same configuration with the same exit.
  expect((await runUntilExit(workerEnv(n, { ...SASL, ...key }))).code).toBe(1);
});
