// ClickHouse answers read with a limit: what a broken proxy sends (an endless body, a page where a
// version should be) is refused in bounded memory, on a real HTTP server standing in for the proxy;
// what ClickHouse 18.16 and the 26.9 engine answer passes, and their refusals are thrown as the
// client throws them. One deadline holds for a whole request: an answer that trickles ends there.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { ClickHouseError, ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { queryText, SMALL_ANSWER_BYTES, versionOf } from "../../src/clickhouse/answer.ts";
import { pingOf } from "../../src/clickhouse/client.ts";
import { CdrWorkerError } from "../../src/errors.ts";
import { CLICKHOUSE_SERVERS } from "../support/services.ts";

setDefaultTimeout(60_000);

// An endless body: 1 MiB chunks for as long as the reader takes them.
let served = 0;
const proxy = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    if (new URL(req.url).pathname === "/ping") {
      // An error page without end where `Ok.` should be.
      return new Response(new ReadableStream({ pull: (c) => void ((served += 1 << 20), c.enqueue(new Uint8Array(1 << 20).fill(0x41))) }), { status: 502 });
    }
    // The client sends the query as the request's body.
    const q = `${new URL(req.url).searchParams.get("query") ?? ""} ${await req.text()}`;
    if (q.includes("version()")) return new Response("<html>Bad Gateway</html>\n");
    // A byte every 200 ms, for ever: never idle for long, never done.
    if (q.includes("trickle"))
      return new Response(
        new ReadableStream({
          async pull(c) {
            await Bun.sleep(200);
            c.enqueue(Uint8Array.of(0x41));
          },
        }),
      );
    const chunk = new Uint8Array(1 << 20).fill(0x41);
    return new Response(
      new ReadableStream({
        pull(c) {
          served += chunk.length;
          c.enqueue(chunk);
        },
      }),
      // An error's body is read with the same limit: the client's own reading of it has none.
      { status: q.includes("error") ? 500 : 200 },
    );
  },
});
afterAll(() => proxy.stop(true));

test("an endless body is refused past the limit, having read a bounded amount", async () => {
  const ch = createClient({ url: `http://127.0.0.1:${proxy.port}`, log: { level: ClickHouseLogLevel.OFF } });
  try {
    const err = await queryText(ch, "SELECT query_id FROM system.processes", 4 << 20).catch((e) => e);
    expect(err).toBeInstanceOf(CdrWorkerError);
    expect((err as CdrWorkerError).code).toBe("CLICKHOUSE_ANSWER");
    expect((err as Error).message).toContain("the answer is over 4194304 bytes");
    // Read up to the limit and a little past it (the stream's buffering), nowhere near endless.
    expect(served).toBeLessThan(64 << 20);
    const page = await queryText(ch, "SELECT version()", SMALL_ANSWER_BYTES);
    expect(() => versionOf(page)).toThrow('SELECT version() answered "<html>Bad Gateway</html>": not a version');
  } finally {
    await ch.close();
  }
});

test("an endless error body is refused past the limit too", async () => {
  const ch = createClient({ url: `http://127.0.0.1:${proxy.port}`, log: { level: ClickHouseLogLevel.OFF } });
  try {
    served = 0;
    const err = await queryText(ch, "SELECT error FROM nowhere", 4 << 20).catch((e) => e);
    expect((err as CdrWorkerError).code).toBe("CLICKHOUSE_ANSWER");
    expect(served).toBeLessThan(64 << 20);
  } finally {
    await ch.close();
  }
});

test("an answer that trickles a byte at a time ends at the request's deadline, not the socket's idle timeout", async () => {
  const ch = createClient({ url: `http://127.0.0.1:${proxy.port}`, request_timeout: 1_000, log: { level: ClickHouseLogLevel.OFF } });
  try {
    const started = performance.now();
    const err = await queryText(ch, "SELECT trickle", SMALL_ANSWER_BYTES, { timeoutMs: 1_500 }).catch((e) => e);
    const took = performance.now() - started;
    expect((err as CdrWorkerError).code).toBe("CLICKHOUSE_ANSWER");
    expect((err as Error).message).toBe("SELECT trickle: no whole answer within 1500 ms");
    expect((err as CdrWorkerError).retryable).toBe(true);
    expect(took).toBeLessThan(2_500);
  } finally {
    await ch.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s: a refusal is thrown as the client throws it, code and text kept", async (_name, server) => {
  const ch = createClient({ url: server.url });
  try {
    const err = await queryText(ch, "SELECT * FROM nodb_answer_test.t", SMALL_ANSWER_BYTES).catch((e) => e);
    expect(err).toBeInstanceOf(ClickHouseError);
    expect((err as ClickHouseError).code).toBe("81");
    expect((err as Error).message).toContain("nodb_answer_test");
  } finally {
    await ch.close();
  }
});

test.each(CLICKHOUSE_SERVERS.map((s) => [s.name, s] as const))("%s: its version and a list pass the limits", async (_name, server) => {
  const ch = createClient({ url: server.url });
  try {
    expect(versionOf(await queryText(ch, "SELECT version()", SMALL_ANSWER_BYTES))).toMatch(server.version);
    const rows = await queryText(ch, "SELECT number FROM system.numbers LIMIT 3", SMALL_ANSWER_BYTES);
    expect(rows).toBe("0\n1\n2\n");
    const json = await queryText(ch, "SELECT 1 AS x", SMALL_ANSWER_BYTES, { format: "JSONEachRow" });
    expect(JSON.parse(json.trim())).toEqual({ x: 1 });
  } finally {
    await ch.close();
  }
});

test("a /ping answered with an endless error page is no answer, read to a bound; the servers answer it", async () => {
  served = 0;
  const abort = new AbortController();
  expect(await pingOf(`http://127.0.0.1:${proxy.port}`)(abort.signal)).toBe(false);
  expect(served).toBeLessThan(64 << 20);
  for (const server of CLICKHOUSE_SERVERS) expect(await pingOf(server.url)(abort.signal)).toBe(true);
});
