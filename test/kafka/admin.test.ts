// What the admin client's answers mean to its callers: which refusals a later attempt gets past.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { Admin } from "../../src/kafka/admin.ts";
import { KafkaError } from "../../src/errors.ts";
import { groupSessionTerms } from "../../src/kafka/group-session.ts";
import { SessionWatch } from "../../src/kafka/session-watch.ts";
import { alterGroupConfig, props } from "../support/kafka.ts";
import { ROOT, uniqueName } from "../support/services.ts";

setDefaultTimeout(60_000);

const admin = new Admin(props, 10_000);
afterAll(() => admin.close());

test("list offsets where no partition leader is known is retryable: a broker just restarted answers so, and the replay check must try again, not stop the worker", async () => {
  // A topic not there answers as a restarted broker's topic does until its leaders are elected:
  // _NOENT, "No leaders found" (seen in test/chaos/broker-restart.test.ts).
  const e = await admin.listOffsets(uniqueName("no-leader"), [0], "latest").then(() => null, (err: unknown) => err);
  expect(e).toBeInstanceOf(KafkaError);
  expect([(e as KafkaError).kafkaName, (e as KafkaError).retryable]).toEqual(["_NOENT", true]);
});

// Under group.protocol=consumer the coordinator keeps the broker's session, not the member's: the
// test brokers set 6 s and a 2 s heartbeat (scripts/kafka/server.properties), where the member's
// default would say 45 s, a lease seven times too long.
test("a group's session under the consumer protocol is read from the broker: what its properties set, for a group it has never seen", async () => {
  const props = await Bun.file(`${ROOT}/scripts/kafka/server.properties`).text();
  const setting = (name: string) => Number(new RegExp(`^${name.replaceAll(".", "\\.")}=(\\d+)$`, "m").exec(props)![1]);
  const terms = await groupSessionTerms(admin, uniqueName("session"));
  expect(terms).toEqual({
    sessionTimeoutMs: setting("group.consumer.session.timeout.ms"),
    heartbeatIntervalMs: setting("group.consumer.heartbeat.interval.ms"),
    source: "group",
  });
  expect(terms.sessionTimeoutMs).toBe(6_000);
});

// An operator may change a group's session while its workers run (KIP-848: the broker's to keep).
// The worker reads it again (SESSION_REREAD_MS) and its lease follows; here one reading is asked.
test("a group's session altered while its member runs is read again and handed on; an unchanged one is not", async () => {
  const group = uniqueName("session-change");
  const changes: number[] = [];
  const watch = new SessionWatch(admin, group, await groupSessionTerms(admin, group), (t) => changes.push(t.sessionTimeoutMs));
  try {
    await watch.read();
    expect(changes).toEqual([]);
    await alterGroupConfig(group, { "consumer.session.timeout.ms": 9_000 });
    await watch.read();
    expect(changes).toEqual([9_000]);
    expect(watch.terms.sessionTimeoutMs).toBe(9_000);
  } finally {
    watch.stop();
  }
});
