// What the admin client's answers mean to its callers: which refusals a later attempt gets past.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { Admin } from "../../src/kafka/admin.ts";
import { KafkaError } from "../../src/errors.ts";
import { props } from "../support/kafka.ts";
import { uniqueName } from "../support/services.ts";

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
