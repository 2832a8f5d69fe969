/** Topic and consumer helpers for tests against the real broker; every test uses its own names. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Admin } from "../../src/kafka/admin.ts";
import { Consumer } from "../../src/kafka/consumer.ts";
import type { Message } from "../../src/kafka/message.ts";
import type { TopicPartition } from "../../src/kafka/partition-list.ts";
import { KAFKA_BROKERS, ROOT, uniqueName, waitFor } from "./services.ts";

export const props = { "bootstrap.servers": KAFKA_BROKERS };

export async function withAdmin<T>(fn: (a: Admin) => Promise<T>): Promise<T> {
  const admin = new Admin(props);
  try {
    return await fn(admin);
  } finally {
    admin.close();
  }
}

export async function createTopic(prefix: string, partitions = 1, configs: Record<string, string> = {}): Promise<string> {
  const name = uniqueName(prefix);
  await withAdmin(async (a) => {
    const [r] = await a.createTopics([{ name, partitions, replicationFactor: 1, configs }]);
    if (r!.err) throw new Error(`create ${name}: ${r!.errName}`);
    await a.awaitServing([{ name, partitions }]);
  });
  return name;
}

export async function deleteTopics(...names: string[]): Promise<void> {
  await withAdmin((a) => a.deleteTopics(names));
}

/** Reads `count` messages from the beginning of a topic with a throwaway group. */
export async function consumeN(topic: string, count: number, timeoutMs = 30_000, readHeaders = true, nativeCopy = true): Promise<Message[]> {
  const c = new Consumer({ props: { ...props, "group.id": uniqueName("reader") }, topics: [topic], readHeaders, nativeCopy });
  const out: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  try {
    while (out.length < count) {
      if (Date.now() > deadline) throw new Error(`consumed ${out.length} of ${count} from ${topic} in ${timeoutMs} ms`);
      const batch = c.poll();
      if (batch.length) out.push(...batch);
      else await Bun.sleep(5);
    }
  } finally {
    await c.close();
  }
  return out;
}

/** The committed offsets of a group, as the broker has them. */
export function committedOffsets(group: string, topic: string, partitions: number): Map<number, bigint> {
  const c = new Consumer({ props: { ...props, "group.id": group }, topics: [] });
  try {
    const tps: TopicPartition[] = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
    return new Map(c.committed(tps).map((r) => [r.partition, r.offset!]));
  } finally {
    void c.close(); // a handle that never joined a group: nothing to wait for
  }
}

/**
 * The group's committed offsets of `topic` added up (a partition never committed counts 0), or
 * undefined while its coordinator does not answer (a broker restarting).
 */
export function committedSum(group: string, topic: string, partitions: number): number | undefined {
  try {
    return Number([...committedOffsets(group, topic, partitions).values()].reduce((a, b) => a + (b > 0n ? b : 0n), 0n));
  } catch {
    return undefined;
  }
}

/**
 * Resolves once the group's committed offsets of `topic` add up to `total` (a partition never
 * committed counts 0): every record durable and committed. A worker's own stats cannot say this
 * at once after it starts: a partition it has read nothing of yet is absent from them.
 */
export async function committedThrough(group: string, topic: string, partitions: number, total: number, ms = 60_000): Promise<void> {
  await waitFor(() => (committedSum(group, topic, partitions) === total ? true : undefined), ms, `${group}'s commits of ${topic} adding up to ${total}`);
}

export const text = (m: Message) => new TextDecoder().decode(m.value!);
export const header = (m: Message, name: string) => {
  const h = m.headers?.find(([k]) => k === name);
  return h ? new TextDecoder().decode(h[1]) : undefined;
};

/** A partition's low and high watermarks, asked from the broker. */
export function watermarks(topic: string, partition = 0): { low: number; high: number } {
  const c = new Consumer({ props: { ...props, "group.id": uniqueName("len") }, topics: [] });
  try {
    return c.queryWatermarks(topic, partition);
  } finally {
    void c.close(); // a handle that never joined a group: nothing to wait for
  }
}

/** Moves each partition's log start to its offset with Kafka's DeleteRecords, as retention would. */
export async function deleteRecordsBefore(topic: string, offsets: Record<number, number>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "cdr-delete-records-"));
  try {
    const file = join(dir, "offsets.json");
    const partitions = Object.entries(offsets).map(([partition, offset]) => ({ topic, partition: Number(partition), offset }));
    writeFileSync(file, JSON.stringify({ version: 1, partitions }));
    const tool = Bun.spawn(
      ["java", "-Xmx256m", "-cp", `${ROOT}/.local/kafka/libs/*`, `-Dlog4j2.configurationFile=${ROOT}/scripts/kafka/log4j2.yaml`,
        "org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", KAFKA_BROKERS, "--offset-json-file", file],
      { stdout: "pipe", stderr: "pipe" },
    );
    const [code, err] = await Promise.all([tool.exited, new Response(tool.stderr).text()]);
    if (code !== 0) throw new Error(`DeleteRecords exited ${code}: ${err}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Messages in a partition (high watermark − low watermark), asked from the broker. */
export function topicLength(topic: string, partition = 0): number {
  const w = watermarks(topic, partition);
  return w.high - w.low;
}

/**
 * Every record a read_committed reader sees in `topic`, read to each partition's high watermark: how
 * a DLQ is counted, since transaction markers and aborted envelopes take offsets too (its length is no
 * count). A read_committed reader's own end is the last stable offset, which a transaction still open
 * holds back; so the read ends only where that end has reached the high watermark (what a
 * read_uncommitted reader asks), and fails, naming both, while a transaction stays open.
 */
export async function readCommitted(topic: string, timeoutMs = 30_000): Promise<Message[]> {
  const c = new Consumer({
    props: { ...props, "group.id": uniqueName("committed"), "enable.partition.eof": "true", "isolation.level": "read_committed" },
    topics: [topic],
    readHeaders: true,
  });
  const hw = new Consumer({ props: { ...props, "group.id": uniqueName("hw"), "isolation.level": "read_uncommitted" }, topics: [] });
  const out: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const parts = c.assignment;
      const ends = parts.map((p) => ({ p: p.partition, end: c.endReached(p.partition), high: hw.queryWatermarks(topic, p.partition).high }));
      if (Date.now() > deadline) {
        const open = ends.filter((e) => e.end === undefined || e.end < e.high).map((e) => `[${e.p}] read to ${e.end ?? "?"}, high watermark ${e.high}`);
        throw new Error(`read ${out.length} records of ${topic} in ${timeoutMs} ms, a transaction still open: ${open.join("; ")}`);
      }
      const batch = c.poll();
      out.push(...batch);
      if (batch.length === 0 && parts.length > 0 && ends.every((e) => e.end !== undefined && e.end >= e.high)) break;
      if (batch.length === 0) await c.waitForMessages(50);
    }
  } finally {
    void hw.close(); // a handle that never joined a group: nothing to wait for
    await c.close();
  }
  return out;
}

/** The records a read_committed reader counts in `topic` (readCommitted). */
export async function committedCount(topic: string): Promise<number> {
  return (await readCommitted(topic)).length;
}

/** Sets a group's own configuration (KIP-848: consumer.session.timeout.ms and the like), with Kafka's own tool. */
export async function alterGroupConfig(group: string, config: Record<string, string | number>): Promise<void> {
  const tool = Bun.spawn(
    ["java", "-Xmx256m", "-cp", `${ROOT}/.local/kafka/libs/*`, `-Dlog4j2.configurationFile=${ROOT}/scripts/kafka/log4j2.yaml`,
      "kafka.admin.ConfigCommand", "--bootstrap-server", KAFKA_BROKERS, "--alter", "--entity-type", "groups",
      "--entity-name", group, "--add-config", Object.entries(config).map(([k, v]) => `${k}=${v}`).join(",")],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [code, err] = await Promise.all([tool.exited, new Response(tool.stderr).text()]);
  if (code !== 0) throw new Error(`kafka-configs --alter --entity-type groups --entity-name ${group} exited ${code}: ${err}`);
}
