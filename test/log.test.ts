// A log line keeps an error whole: name, message, code, whether a retry can help, its stack, and
// its causes, so a wrapped failure still says what caused it.
import { expect, setDefaultTimeout, test } from "bun:test";
import { KafkaError } from "../src/errors.ts";
import { errorFields, LineLimit, log, setLogSink } from "../src/log.ts";

setDefaultTimeout(60_000);

test("an error in a log line carries its cause chain and stack", () => {
  const root = new KafkaError("KAFKA_CLIENT", "metadata: _TRANSPORT: Broker transport failure", -195, "_TRANSPORT", true);
  const wrapped = new KafkaError("KAFKA_CLIENT", "cannot reach Kafka: certificate expired", -195, "_TRANSPORT", false, { cause: root });
  const lines: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((l: string) => (lines.push(l), true)) as typeof process.stderr.write;
  try {
    log.error("failed", { err: wrapped });
  } finally {
    process.stderr.write = write;
  }
  const err = JSON.parse(lines[0]!).err;
  expect(err).toMatchObject({ name: "KafkaError", message: "cannot reach Kafka: certificate expired", code: "KAFKA_CLIENT", retryable: false });
  expect(err.stack).toContain("log.test.ts");
  expect(err.cause).toMatchObject({ name: "KafkaError", message: "metadata: _TRANSPORT: Broker transport failure", retryable: true });
  expect(err.cause.stack).toContain("log.test.ts");
});

test("a cycle of causes ends after five; a cause that is no Error is its text", () => {
  const a = new Error("a");
  const b = new Error("b", { cause: a });
  (a as { cause?: unknown }).cause = b;
  let depth = 0;
  for (let f = errorFields(a) as { cause?: unknown }; f?.cause; f = f.cause as { cause?: unknown }) depth++;
  expect(depth).toBe(5);
  expect((errorFields(new Error("x", { cause: 42 })) as { cause: unknown }).cause).toBe("42");
});

test("a URL's user information never reaches a line, whatever its password holds: in msg, fields and errors", () => {
  const lines: string[] = [];
  setLogSink((l) => void lines.push(l));
  try {
    const url = "http://worker:p@ss,w/rd:x@ch-a:8123,http://worker:p@ss,w/rd:x@ch-b:8123";
    log.warn(`cannot reach ${url}`, { endpoint: url, err: new Error(`connect ${url} refused`) });
  } finally {
    setLogSink();
  }
  const line = lines.join("\n");
  expect(line).not.toContain("p@ss");
  expect(line).not.toContain("w/rd");
  expect(line).toContain("http://[redacted]@ch-a:8123,http://[redacted]@ch-b:8123");
});

test("a line that can come once a record is said ten times a minute; the next one said counts those left out", () => {
  let now = 0;
  const limit = new LineLimit(10, 60_000, () => now);
  const said: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 200_000; i++) {
    const fields = limit.take({ offset: i });
    if (fields) said.push(fields);
  }
  expect(said.map((f) => f.offset)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  now += 60_000;
  expect(limit.take({ offset: 200_000 })).toEqual({ offset: 200_000, left_out: 199_990 });
  expect(limit.take({ offset: 200_001 })).toEqual({ offset: 200_001 });
});
