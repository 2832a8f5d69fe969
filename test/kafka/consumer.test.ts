// The consumer binding against the real broker.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync } from "node:fs";
import { Consumer } from "../../src/kafka/consumer.ts";
import { Producer } from "../../src/kafka/producer.ts";
import { committedOffsets, createTopic, deleteTopics, props, text } from "../support/kafka.ts";
import { uniqueName, waitFor } from "../support/services.ts";

setDefaultTimeout(60_000);

const cleanup: string[] = [];
afterAll(async () => {
  if (cleanup.length) await deleteTopics(...cleanup);
});

describe("consumer", () => {
  test("committed offsets survive a consumer restart: the new consumer resumes exactly there", async () => {
    const topic = await createTopic("resume", 1);
    cleanup.push(topic);
    const group = uniqueName("g");
    const p = new Producer(props);
    await p.produceBatch(topic, Array.from({ length: 100 }, (_, i) => `v${i}`));
    p.close();
    const c1 = new Consumer({ props: { ...props, "group.id": group }, topics: [topic] });
    const seen: number[] = [];
    await waitFor(async () => { seen.push(...c1.poll().map((m) => m.offset)); return seen.length >= 100 ? true : undefined; });
    const results = await c1.commit([{ topic, partition: 0, offset: 42n }]);
    expect(results).toEqual([{ topic, partition: 0, offset: 42n, err: 0 }]);
    await c1.close();
    expect(committedOffsets(group, topic, 1).get(0)).toBe(42n);
    const c2 = new Consumer({ props: { ...props, "group.id": group }, topics: [topic] });
    const first = await waitFor(() => c2.poll()[0]);
    expect(first.offset).toBe(42);
    await c2.close();
  });
  // The poll that serves an assignment can hand out records fetched for it at once, before the
  // caller has seen the assignment: a new owner stored records its replay check would have skipped.
  test("assignPaused: no record of a newly assigned partition comes out until the caller resumes it, then from its commit", async () => {
    const topic = await createTopic("assign-paused", 2);
    cleanup.push(topic);
    const group = uniqueName("g");
    const p = new Producer(props);
    await p.produceBatch(topic, Array.from({ length: 200 }, (_, i) => `v${i}`));
    p.close();
    const c = new Consumer({ props: { ...props, "group.id": group }, topics: [topic], assignPaused: true });
    try {
      const early: number[] = [];
      await waitFor(() => {
        early.push(...c.poll().map((m) => m.offset));
        return c.assignment.length === 2 ? true : undefined;
      });
      // Long enough for librdkafka to fetch from both partitions had they not been paused.
      const until = Date.now() + 1500;
      while (Date.now() < until) {
        early.push(...c.poll().map((m) => m.offset));
        await c.waitForMessages(50);
      }
      expect(early).toEqual([]);
      // Never fetched: its high watermark is not known, not 0 or librdkafka's −1001.
      expect([c.watermarks(topic, 0), c.watermarks(topic, 1)]).toEqual([null, null]);
      c.resume(c.assignment);
      const seen: number[] = [];
      await waitFor(() => {
        seen.push(...c.poll().map((m) => m.offset));
        return seen.length >= 200 ? true : undefined;
      });
      expect(seen.length).toBe(200);
      expect(Math.min(...seen)).toBe(0);
      const highs = [c.watermarks(topic, 0)?.high ?? 0, c.watermarks(topic, 1)?.high ?? 0];
      expect(highs[0]! + highs[1]!).toBe(200);
    } finally {
      await c.close();
    }
  });
  // librdkafka's broker thread idles up to a second while none of its partitions is fetchable, and
  // a resume did not wake it (scripts/librdkafka/patches/resume-wakeup.patch): every resume, the
  // first after a paused assignment's replay check included, waited out the rest of that second.
  test("a resumed partition is fetched at once, not at the fetcher's next idle wake-up", async () => {
    const topic = await createTopic("resume-wakeup", 1);
    cleanup.push(topic);
    const p = new Producer(props);
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("g") }, topics: [] });
    try {
      await p.produceBatch(topic, ["first"]);
      c.assign([{ topic, partition: 0, offset: 0n }]);
      const tp = [{ topic, partition: 0 }];
      const next = async () => {
        const got: string[] = [];
        await waitFor(async () => {
          got.push(...c.poll().map((m) => new TextDecoder().decode(m.value!)));
          if (got.length === 0) await c.waitForMessages(20);
          return got.length > 0 ? got : undefined;
        });
        return got;
      };
      expect(await next()).toEqual(["first"]);
      const waits: number[] = [];
      for (let i = 0; i < 3; i++) {
        c.pause(tp);
        await p.produceBatch(topic, [`r${i}`]);
        // Paused long enough for the fetch in flight to come back and the fetcher to go idle.
        await Bun.sleep(300);
        const t = performance.now();
        c.resume(tp);
        expect(await next()).toEqual([`r${i}`]);
        waits.push(performance.now() - t);
      }
      // Unpatched: 500–700 ms each (the rest of the idle second); patched: one fetch's round trip.
      expect(Math.max(...waits)).toBeLessThan(250);
    } finally {
      p.close();
      await c.close();
    }
  });
  test("two consumers in one group split the partitions; a revocation waits for the caller, then the new assignment arrives", async () => {
    const topic = await createTopic("split", 4);
    cleanup.push(topic);
    const group = uniqueName("g");
    const opts = { props: { ...props, "group.id": group, "session.timeout.ms": "6000" }, topics: [topic] };
    const a = new Consumer(opts);
    await waitFor(() => { a.poll(); return a.assignment.length === 4 ? true : undefined; });
    expect(a.takeAssigned().map((p) => p.length)).toEqual([4]);
    const b = new Consumer(opts);
    // a must see the revocation and hold it until the caller completes it.
    await waitFor(() => { a.poll(); b.poll(); return a.pendingRevoke ? true : undefined; });
    expect(a.pendingRevoke!.length).toBe(4);
    a.completeRevoke();
    await waitFor(() => { a.poll(); b.poll(); if (b.pendingRevoke) b.completeRevoke(); return a.assignment.length + b.assignment.length === 4 && a.assignment.length > 0 && b.assignment.length > 0 ? true : undefined; }, 30_000);
    // After the revocation completed: a's new share, added by an assignment it has not taken yet.
    const added = a.takeAssigned().flat().map((p) => p.partition).sort();
    expect(added).toEqual(a.assignment.map((p) => p.partition).sort());
    const all = [...a.assignment, ...b.assignment].map((p) => p.partition).sort();
    expect(all).toEqual([0, 1, 2, 3]);
    await a.close();
    await b.close();
  });
  test("an empty poll's wait ends when a message arrives (librdkafka's wake-up) or at wake(), not at its deadline; close frees the pipe", async () => {
    const topic = await createTopic("wake", 1);
    cleanup.push(topic);
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("wake") }, topics: [topic] });
    const p = new Producer(props);
    try {
      await waitFor(() => { c.poll(); return c.assignment.length === 1 ? true : undefined; });
      // Nothing to read: a short wait ends at its deadline.
      expect(c.poll()).toEqual([]);
      await c.waitForMessages(50);
      // An arrival ends a wait whose deadline is far away.
      const deadlineMs = 60_000;
      const t0 = performance.now();
      const woken = c.waitForMessages(deadlineMs);
      await p.produce(topic, "wake up");
      await woken;
      expect(performance.now() - t0).toBeLessThan(deadlineMs / 2);
      const got = await waitFor(() => { const m = c.poll(); return m.length ? m : undefined; });
      expect(got.map(text)).toEqual(["wake up"]);
      // wake() ends a wait too (the worker's loop: a flush settled, a stop), and only the one in progress.
      const t1 = performance.now();
      const waiting = c.waitForMessages(deadlineMs);
      c.wake();
      await waiting;
      expect(performance.now() - t1).toBeLessThan(deadlineMs / 2);
      // Nobody waits: nothing to end. Anything librdkafka puts on the queue ends a wait too (an
      // error or event of a loaded broker, seen once in CI), so of three tries one must last its
      // deadline; a wake() that lingered would end all three at once.
      const lasted: number[] = [];
      for (let i = 0; i < 3 && !lasted.some((ms) => ms >= 45); i++) {
        c.wake();
        const t2 = performance.now();
        await c.waitForMessages(50);
        lasted.push(performance.now() - t2);
      }
      expect(lasted.some((ms) => ms >= 45)).toBe(true);
    } finally {
      p.close();
      await c.close();
    }
    // Closed consumers leave no descriptor behind (the read end of the pipe closes once its stream
    // lets go of it, a turn of the event loop later). Counted after the first consumer: Bun opens
    // a pipe of its own on the first stream over a descriptor.
    const openFds = () => readdirSync("/proc/self/fd").length;
    const fdsBefore = openFds();
    for (let i = 0; i < 3; i++) {
      const more = new Consumer({ props: { ...props, "group.id": uniqueName("wake") }, topics: [topic] });
      await more.waitForMessages(10);
      await more.close();
    }
    await waitFor(() => (openFds() <= fdsBefore ? true : undefined), 4_000, "wake-up pipes closed");
  }, 30_000);
  test("200k messages consumed without a leak: RSS after the run within a few MiB of RSS after a warm-up", async () => {
    const topic = await createTopic("leak", 1);
    cleanup.push(topic);
    const p = new Producer(props);
    const payload = "x".repeat(200);
    for (let i = 0; i < 4; i++) await p.produceBatch(topic, Array.from({ length: 100_000 }, () => payload));
    p.close();
    const c = new Consumer({ props: { ...props, "group.id": uniqueName("g"), "queued.max.messages.kbytes": "8192" }, topics: [topic] });
    let got = 0;
    const drain = async (total: number) => {
      while (got < total) {
        const b = c.poll();
        got += b.length;
        if (!b.length) await Bun.sleep(2);
      }
    };
    await drain(200_000);
    Bun.gc(true);
    const warm = process.memoryUsage.rss();
    await drain(400_000);
    Bun.gc(true);
    const after = process.memoryUsage.rss();
    await c.close();
    expect((after - warm) / 2 ** 20).toBeLessThan(8);
  }, 60_000);
});
