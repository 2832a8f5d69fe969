/**
 * Produce and consume rate of the bun:ffi binding versus kcat, same topic, same machine, one run.
 * Usage: bun scripts/bench/kafka.ts [messages=1000000] [bytes=250]   (needs scripts/services.sh start)
 * BENCH_ROUNDS (default 5): rounds of all measurements; medians are reported.
 *
 * Consume is compared twice: with `kcat -G` (a balanced group consumer, the binding's own mode:
 * both pay the group join) and with `kcat -C` (plain assign, no group: the stricter bar). The
 * ratio the goal is judged on is the stricter one. Each rate is wall time from start to
 * the last message, group join included for the binding, process start included for kcat.
 */
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";

const N = Number(process.argv[2] ?? 1_000_000);
const SIZE = Number(process.argv[3] ?? 250);
// This VM's speed drifts by tens of percent within minutes: every figure is the median over
// rounds (each round all six measurements on fresh topics), with every round's ratios listed.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092";
const props = { "bootstrap.servers": brokers };
const payload = "x".repeat(SIZE);
const producerProps = { ...props, "linger.ms": "5", "batch.num.messages": "10000", "enable.idempotence": "false" };
const admin = new Admin(props);

async function timed(fn: () => Promise<void> | void): Promise<number> {
  const t0 = performance.now();
  await fn();
  return N / ((performance.now() - t0) / 1000);
}

interface Round {
  produce: number; produceKcat: number;
  resume: number; resumeFirstMs: number; fresh: number; freshFirstMs: number; kcat: number; kcatGroup: number;
  uncapped: number; kcatUncapped: number;
}

/** Prefetch limits both clients never reach on this topic. */
const UNCAPPED = { "queued.min.messages": "10000000", "queued.max.messages.kbytes": "2097151" };

async function round(): Promise<Round> {
  const stamp = Date.now().toString(36);
  const topics = { binding: `bench.kafka.binding.${stamp}`, kcat: `bench.kafka.kcat.${stamp}` };
  await admin.createTopics(Object.values(topics).map((name) => ({ name, partitions: 1, replicationFactor: 1, configs: {} })));
  const file = `/tmp/bench-kafka-${stamp}.txt`;
  await Bun.write(file, (payload + "\n").repeat(N));

  const produce = await timed(async () => {
    const p = new Producer(producerProps);
    const chunk = Array.from({ length: 10_000 }, () => payload);
    const inFlight: Promise<void>[] = [];
    for (let sent = 0; sent < N; sent += chunk.length) {
      inFlight.push(p.produceBatch(topics.binding, chunk.slice(0, Math.min(chunk.length, N - sent))));
      if (inFlight.length >= 8) await inFlight.shift();
    }
    await Promise.all(inFlight);
    p.close();
  });
  const produceKcat = await timed(() => {
    Bun.spawnSync(["kcat", "-b", brokers, "-P", "-t", topics.kcat, "-l", file, "-X", "linger.ms=5", "-X", "batch.num.messages=10000"]);
  });

  // The binding consumes twice. "fresh": a new group with no committed offset, as on a first
  // deployment; librdkafka 2.0.2 then waits ~100 ms (a fixed offset-query backoff) before it asks
  // for the earliest offset, and kcat -G pays the same. "resume": the group has committed offset
  // 0, as on every later start of the worker; the ratios against kcat use this one.
  async function consumeBinding(group: string, extra: Record<string, string> = {}): Promise<{ rate: number; firstMs: number }> {
    let firstMs = 0;
    const rate = await timed(async () => {
      const t0 = performance.now();
      const c = new Consumer({ props: { ...props, "group.id": group, ...extra }, topics: [topics.binding], maxBatch: 10_000 });
      let got = 0;
      while (got < N) {
        const b = c.poll();
        if (got === 0 && b.length > 0) firstMs = performance.now() - t0;
        got += b.length;
        // As the worker does: an empty poll waits for librdkafka's wake-up instead of polling again.
        if (b.length === 0) await c.waitForMessages(100);
      }
      await c.close();
    });
    return { rate, firstMs };
  }
  const fresh = await consumeBinding(`bench-fresh-${stamp}`);
  /** A group whose committed offset is 0, as a worker that has run before finds its own. */
  async function groupAtStart(group: string): Promise<string> {
    const committer = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
    await committer.commit([{ topic: topics.binding, partition: 0, offset: 0n }]);
    await committer.close();
    return group;
  }
  const resume = await consumeBinding(await groupAtStart(`bench-resume-${stamp}`));
  // Again with the prefetch cap out of reach, for both clients: librdkafka 2.0.2 stops fetching
  // at the cap and resumes only when its broker thread next wakes (up to ~1 s), which hits
  // whichever consumer is slower than the fetcher at random (see scripts/bench/prefetch.ts).
  const uncapped = await consumeBinding(await groupAtStart(`bench-uncapped-${stamp}`), UNCAPPED);

  const kcatConsume = (mode: string[], extra: Record<string, string> = {}) => timed(() => {
    const x = Object.entries(extra).flatMap(([k, v]) => ["-X", `${k}=${v}`]);
    Bun.spawnSync(["kcat", "-b", brokers, ...mode, "-o", "beginning", "-c", String(N), "-e", "-q", "-f", "%s\n", "-X", "auto.offset.reset=earliest", ...x], { stdout: "ignore" });
  });
  const kcat = await kcatConsume(["-C", "-t", topics.binding]);
  const kcatUncapped = await kcatConsume(["-C", "-t", topics.binding], UNCAPPED);
  const kcatGroup = await kcatConsume(["-G", `bench-kcat-${stamp}`, topics.binding]);
  await admin.deleteTopics(Object.values(topics));
  await Bun.file(file).delete();
  return { produce, produceKcat, resume: resume.rate, resumeFirstMs: resume.firstMs, fresh: fresh.rate, freshFirstMs: fresh.firstMs, kcat, kcatGroup, uncapped: uncapped.rate, kcatUncapped };
}

const rounds: Round[] = [];
for (let i = 0; i < ROUNDS; i++) rounds.push(await round());
admin.close();

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]!; };
const med = (f: (r: Round) => number) => Math.round(median(rounds.map(f)));
const ratio = (f: (r: Round) => number) => +median(rounds.map(f)).toFixed(2);
const each = (f: (r: Round) => number) => rounds.map((x) => +f(x).toFixed(2));
console.log(JSON.stringify({
  messages: N, bytes: SIZE, rounds: ROUNDS,
  produce: {
    binding_msgs_per_s: med((x) => x.produce), kcat_msgs_per_s: med((x) => x.produceKcat),
    ratio: ratio((x) => x.produce / x.produceKcat), ratio_each_round: each((x) => x.produce / x.produceKcat),
  },
  consume: {
    binding_msgs_per_s: med((x) => x.resume), binding_first_message_ms: med((x) => x.resumeFirstMs),
    kcat_msgs_per_s: med((x) => x.kcat), ratio: ratio((x) => x.resume / x.kcat), ratio_each_round: each((x) => x.resume / x.kcat),
    kcat_group_msgs_per_s: med((x) => x.kcatGroup), ratio_group: ratio((x) => x.resume / x.kcatGroup),
    fresh_group: { binding_msgs_per_s: med((x) => x.fresh), binding_first_message_ms: med((x) => x.freshFirstMs), ratio: ratio((x) => x.fresh / x.kcat) },
    uncapped_prefetch: {
      binding_msgs_per_s: med((x) => x.uncapped), kcat_msgs_per_s: med((x) => x.kcatUncapped),
      ratio: ratio((x) => x.uncapped / x.kcatUncapped), ratio_each_round: each((x) => x.uncapped / x.kcatUncapped),
    },
  },
}));
process.exit(0);
