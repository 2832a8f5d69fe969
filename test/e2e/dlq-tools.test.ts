// `dlq inspect` and `dlq replay` against the real broker, then the worker lands the replayed records.
import { expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope, HEADERS, MAX_PAYLOAD_CHARS } from "../../src/dlq/envelope.ts";
import { payloadTextOf } from "../../src/dlq/reader.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { toJson, withFields } from "../fixtures/records.ts";
import { consumeN, props, text, topicLength } from "../support/kafka.ts";
import { e2eScope } from "../support/e2e.ts";
import { ROOT, waitFor } from "../support/services.ts";
import { startWorker, workerEnv } from "../support/worker.ts";

setDefaultTimeout(60_000);

const { ch, names } = e2eScope();

test("payloadTextOf returns the vendor payload verbatim, big integers included", () => {
  const payload = '{"raw_id":"x","up_bytes":18446744073709551615}';
  const raw = encodeEnvelope({ reason: "normalization_error", field: null, payload, payloadIsObject: true }, new Date(), "w");
  expect(payloadTextOf(raw, JSON.parse(raw))).toBe(payload);
  const malformed = encodeEnvelope({ reason: "malformed_json", field: null, payload: "{oops", payloadIsObject: false }, new Date(), "w");
  expect(payloadTextOf(malformed, JSON.parse(malformed))).toBe("{oops");
});

test("dlq inspect counts by reason and field; replay --dry-run lists; a real replay lands the records in ClickHouse", async () => {
  const n = await names("replay");
  const env = workerEnv(n);
  const payloads = [toJson(withFields({ raw_id: "replay-1", up_bytes: 18446744073709551615n, down_bytes: 0 })), toJson(withFields({ raw_id: "replay-2" }))];
  const p = new Producer(props);
  const at = new Date("2026-01-01T00:00:00Z");
  for (const payload of payloads) await p.produce(n.dlq, encodeEnvelope({ reason: "normalization_error", field: null, payload, payloadIsObject: true }, at, "w"));
  await p.produce(n.dlq, encodeEnvelope({ reason: "malformed_json", field: null, payload: "{oops", payloadIsObject: false }, at, "w"));
  p.close();
  const cli = async (...args: string[]) => {
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env, stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    return JSON.parse(out);
  };
  const inspect = await cli("dlq", "inspect", "--samples", "1");
  expect(inspect).toMatchObject({ total: 3, by_reason: { normalization_error: 2, malformed_json: 1 }, by_field: { "(none)": 3 } });
  const dry = await cli("dlq", "replay", "--reason", "normalization_error", "--dry-run");
  expect(dry.would_send).toBe(2);
  expect(dry.records.map((r: { payload: string }) => r.payload)).toEqual(payloads);
  expect(await cli("dlq", "replay", "--unverified", "--reason", "normalization_error", "--since", "2025-12-31T00:00:00Z")).toMatchObject({ sent: 2 });
  const replayed = await consumeN(n.raw, 2);
  expect(replayed.map(text).sort()).toEqual([...payloads].sort());
  const w = await startWorker(env);
  await waitFor(async () => {
    const rs = await ch.query({ query: `SELECT toString(up_bytes) AS up FROM ${n.database}.${n.table} ORDER BY raw_id`, format: "JSONEachRow" });
    const rows = await rs.json<{ up: string }>();
    return rows.length === 2 ? rows : undefined;
  }, 20_000, "replayed rows").then((rows) => expect(rows[0]!.up).toBe("18446744073709551615"));
  expect(await w.stop()).toBe(0);
}, 60_000);

// Anyone who can write to the DLQ can put anything there: a record that is not an envelope is
// reported with its offset and skipped, never sent; text keys such as __proto__ count like others.
test("regression: dlq inspect and replay take any DLQ: {}, text, missing fields and a payload of another type are skipped and reported; __proto__ counts", async () => {
  const n = await names("replay-any");
  const env = workerEnv(n);
  const at = new Date("2026-01-01T00:00:00Z");
  const good = toJson(withFields({ raw_id: "replay-any-1" }));
  const deep = `{"failure_reason":"malformed_json","failed_field":null,"failed_at":"x","worker_instance":"w","original_payload":{"x":${"[".repeat(50_000)}${"]".repeat(50_000)}}}`;
  const records = [
    "{}",
    "not json",
    '{"original_payload":{"raw_id":"x"},"failure_reason":"normalization_error"}',
    '{"original_payload":42,"failure_reason":"normalization_error","failed_field":null,"failed_at":"x","worker_instance":"w"}',
    deep,
    encodeEnvelope({ reason: "normalization_error", field: "__proto__", payload: good, payloadIsObject: true }, at, "w"),
    encodeEnvelope({ reason: "normalization_error", field: "constructor", payload: good, payloadIsObject: true }, at, "w"),
  ];
  const p = new Producer(props);
  for (const r of records) await p.produce(n.dlq, r);
  p.close();
  const cli = async (...args: string[]) => {
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, ...args], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(`${code} ${err.split("\n").filter((l) => l.includes("skipped")).length}`).toBe("0 5");
    return JSON.parse(out);
  };
  const inspect = await cli("dlq", "inspect");
  expect(inspect.total).toBe(2);
  expect(inspect.unreadable).toBe(5);
  expect(inspect.unreadable_records.map((u: { offset: number }) => u.offset)).toEqual([0, 1, 2, 3, 4]);
  expect(inspect.unreadable_records[3].problem).toBe("original_payload is neither an object nor a string");
  expect(Object.getOwnPropertyDescriptor(inspect.by_field, "__proto__")?.value).toBe(1);
  expect(inspect.by_field.constructor).toBe(1);
  expect(inspect.by_reason).toEqual({ normalization_error: 2 });
  expect(await cli("dlq", "replay", "--unverified")).toMatchObject({ sent: 2, unreadable: 5 });
  const replayed = await consumeN(n.raw, 2);
  expect(replayed.map(text)).toEqual([good, good]);
}, 60_000);

// Anyone who can write to the DLQ topic could put records into the raw topic through a replay: without
// the workers' key it sends nothing unless told --unverified. A payload the envelope holds cut short
// is only a part of its record, and is never sent, with its header or without it.
test("dlq replay without DLQ_PROVENANCE_KEY refuses in one line (exit 2) unless --unverified; a truncated payload is never sent", async () => {
  const n = await names("replay-unverified");
  const env = workerEnv(n);
  const at = new Date("2026-01-01T00:00:00Z");
  const good = toJson(withFields({ raw_id: "replay-whole" }));
  const long = toJson(withFields({ raw_id: "replay-long", svc: "x".repeat(MAX_PAYLOAD_CHARS) }));
  const cut = encodeEnvelope({ reason: "normalization_error", field: null, payload: long, payloadIsObject: true }, at, "w");
  const p = new Producer({ ...props, "message.max.bytes": "4000000" });
  await p.produce(n.dlq, encodeEnvelope({ reason: "normalization_error", field: null, payload: good, payloadIsObject: true }, at, "w"));
  await p.produce(n.dlq, cut, { headers: [[HEADERS.truncated, "true"]] });
  await p.produce(n.dlq, cut); // the same, its header gone
  p.close();
  const cli = async (...args: string[]) => {
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "replay", ...args], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { out, err, code };
  };
  const refused = await cli();
  expect(refused.code).toBe(2);
  expect(refused.out).toBe("");
  expect(refused.err.trim().split("\n")).toHaveLength(1);
  expect(refused.err).toContain("dlq replay without DLQ_PROVENANCE_KEY cannot tell a worker's envelope from one anyone wrote");
  expect(topicLength(n.raw, 0) + topicLength(n.raw, 1) + topicLength(n.raw, 2)).toBe(0);
  // A dry run sends nothing: it lists, with or without the key.
  expect(JSON.parse((await cli("--dry-run")).out)).toMatchObject({ would_send: 1, truncated_payloads: 2 });
  const sent = await cli("--unverified");
  expect(sent.code).toBe(0);
  expect(JSON.parse(sent.out)).toMatchObject({ sent: 1, truncated_payloads: 2 });
  expect((await consumeN(n.raw, 1)).map(text)).toEqual([good]);
  expect(topicLength(n.raw, 0) + topicLength(n.raw, 1) + topicLength(n.raw, 2)).toBe(1);
}, 60_000);

// A replay's printed position is the first record not replayed, however it stopped: resuming from
// it sends every record once. (--limit used to stop sending but report the range's end as next.)
test("regression: a replay stopped by --limit, SIGTERM and SIGINT resumes from the printed position; every record is sent once", async () => {
  const n = await names("replay-resume");
  const env = workerEnv(n);
  const TOTAL = 60_000;
  const at = new Date("2026-01-01T00:00:00Z");
  const p = new Producer(props);
  const envelopes = Array.from({ length: TOTAL }, (_, i) =>
    encodeEnvelope({ reason: "normalization_error", field: null, payload: `{"raw_id":"resume-${i}"}`, payloadIsObject: true }, at, "w"),
  );
  await p.produceBatch(n.dlq, envelopes);
  p.close();
  const replay = async (args: string[], signal?: NodeJS.Signals) => {
    // Chunks of 50 when it is to be signalled: the 30,000-odd records a signalled run may have left
    // take hundreds of acknowledged sends, time to signal it even on a loaded machine (with chunks
    // of 500 a run once ended before its first chunk was seen).
    const chunk = signal ? "50" : "500";
    const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "replay", "--unverified", "--chunk-size", chunk, ...args], { env, stdout: "pipe", stderr: "pipe" });
    if (signal) {
      const before = topicLength(n.raw);
      // Signalled once this run's first chunk landed, well before its last.
      await waitFor(async () => (topicLength(n.raw) > before ? true : proc.exitCode !== null ? true : undefined), 30_000, "a first chunk sent");
      proc.kill(signal);
    }
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    return JSON.parse(out) as { sent: number; stopped_by?: string; resume: string; next_offsets: Record<string, number> };
  };
  const first = await replay(["--limit", "7000"]);
  expect([first.sent, first.stopped_by, first.next_offsets]).toEqual([7000, "limit", { "0": 7000 }]);
  const second = await replay(first.resume.split(" "), "SIGTERM");
  expect(second.stopped_by).toBe("SIGTERM");
  const third = await replay(second.resume.split(" "), "SIGINT");
  expect(third.stopped_by).toBe("SIGINT");
  const last = await replay(third.resume.split(" "));
  expect(last.stopped_by).toBeUndefined();
  expect(last.next_offsets).toEqual({ "0": TOTAL });
  expect(first.sent + second.sent + third.sent + last.sent).toBe(TOTAL);
  // Each stopped run sent whole chunks up to its printed position, and not its limit or the end.
  expect(second.next_offsets["0"]! - 7000).toBe(second.sent);
  expect(second.next_offsets["0"]).toBeLessThan(TOTAL);
  expect(third.next_offsets["0"]).toBeLessThan(TOTAL);
  const replayed = await consumeN(n.raw, TOTAL, 60_000, false);
  const ids = new Set(replayed.map((m) => text(m)));
  expect(ids.size).toBe(TOTAL);
}, 180_000);

test("a replay killed with SIGKILL goes on from its last progress line's command: the selection kept, at most one chunk sent twice", async () => {
  const n = await names("replay-kill");
  const env = workerEnv(n);
  const TOTAL = 20_000;
  const at = new Date("2026-01-01T00:00:00Z");
  // Every other envelope of another reason: a resume that dropped --reason would send those too.
  const reasonOf = (i: number) => (i % 2 === 0 ? "normalization_error" : "schema_violation");
  const p = new Producer(props);
  await p.produceBatch(
    n.dlq,
    Array.from({ length: TOTAL }, (_, i) =>
      encodeEnvelope({ reason: reasonOf(i) as "normalization_error", field: null, payload: `{"raw_id":"kill-${i}"}`, payloadIsObject: true }, at, "w"),
    ),
  );
  p.close();
  const CHUNK = 50;
  const proc = Bun.spawn(["bun", `${ROOT}/src/main.ts`, "dlq", "replay", "--unverified", "--reason", "normalization_error", "--chunk-size", String(CHUNK)], {
    env,
    stdout: "pipe",
    stderr: "pipe",
  });
  // Killed once a few progress lines are out, well before its end; the last line names the command.
  const lines: string[] = [];
  const decoder = new TextDecoder();
  const reading = (async () => {
    for await (const bytes of proc.stderr) lines.push(...decoder.decode(bytes).split("\n").filter((l) => l.includes('"dlq replay progress"')));
  })();
  await waitFor(() => (lines.length >= 3 || proc.exitCode !== null ? true : undefined), 30_000, "progress lines");
  proc.kill("SIGKILL");
  await proc.exited;
  await reading;
  expect(proc.exitCode).toBeNull();
  const last = JSON.parse(lines.at(-1)!) as { sent: number; resume_command: string };
  expect(last.sent).toBeLessThan(TOTAL / 2);
  const words = last.resume_command.split(" ");
  expect(words.slice(0, 3)).toEqual(["cdr-worker", "dlq", "replay"]);
  expect(words).toContain("--reason");
  const resumed = Bun.spawnSync(["bun", `${ROOT}/src/main.ts`, ...words.slice(1)], { env, stdout: "pipe", stderr: "pipe" });
  expect(resumed.exitCode).toBe(0);
  expect(JSON.parse(resumed.stdout.toString()).next_offsets).toEqual({ "0": TOTAL });
  // Every selected payload at least once, none of the other reason, at most one chunk twice.
  const length = [0, 1, 2].reduce((sum, partition) => sum + topicLength(n.raw, partition), 0);
  const sentTotal = (await consumeN(n.raw, length, 60_000, false)).map(text);
  const distinct = new Set(sentTotal);
  expect(distinct.size).toBe(TOTAL / 2);
  for (const payload of distinct) expect(Number(/kill-(\d+)/.exec(payload)![1]) % 2).toBe(0);
  expect(sentTotal.length - distinct.size).toBeLessThanOrEqual(CHUNK);
});
