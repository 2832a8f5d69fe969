/**
 * The group's session as the coordinator keeps it, for the membership lease (delivery/membership.ts).
 * Under the classic protocol the member asks for its session (session.timeout.ms, sent in JoinGroup)
 * and the coordinator keeps that. Under group.protocol=consumer (KIP-848) the broker sets it: the
 * group's consumer.session.timeout.ms, else the broker's group.consumer.session.timeout.ms, and the
 * member's session.timeout.ms counts for nothing. A lease judged from the member's own setting
 * would outlast a broker's shorter session, and a worker cut off from Kafka would go on sending
 * after its partitions were given to another. So the terms are read from the group's configuration
 * (DescribeConfigs on the group, which returns the broker's default where the group sets none).
 */
import { KafkaError } from "../errors.ts";
import type { Admin } from "./admin.ts";

export interface SessionTerms {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** Where they come from, for the start line. */
  source: "member" | "group";
}

/** The terms a member's own properties give (classic protocol), at librdkafka's defaults where unset. */
export function memberSessionTerms(props: Record<string, string>): SessionTerms {
  return {
    sessionTimeoutMs: Number(props["session.timeout.ms"] ?? 45_000),
    heartbeatIntervalMs: Number(props["heartbeat.interval.ms"] ?? (usesConsumerProtocol(props) ? 5_000 : 3_000)),
    source: "member",
  };
}

export function usesConsumerProtocol(props: Record<string, string>): boolean {
  return (props["group.protocol"] ?? "classic").toLowerCase() === "consumer";
}

/**
 * The group's terms under group.protocol=consumer. Needs DescribeConfigs on the group (ACL
 * `--operation DescribeConfigs --group <group>`); a refusal says so in one line, and stops the
 * worker: no lease is safe without the session it is measured against.
 */
export async function groupSessionTerms(admin: Pick<Admin, "describeConfigs">, group: string): Promise<SessionTerms> {
  let configs: Awaited<ReturnType<Admin["describeConfigs"]>>;
  try {
    configs = await admin.describeConfigs(group, "group");
  } catch (e) {
    const why = e instanceof KafkaError ? e.message : String(e);
    throw new KafkaError(
      "KAFKA_ADMIN",
      `group.protocol=consumer: the group's session (consumer.session.timeout.ms) could not be read, and the ` +
        `exactly-once lease is measured against it: grant DescribeConfigs on group ${group}, or use ` +
        `group.protocol=classic: ${why}`,
      e instanceof KafkaError ? e.kafkaCode : undefined,
      e instanceof KafkaError ? e.kafkaName : undefined,
      e instanceof KafkaError ? e.retryable : false,
      { cause: e },
    );
  }
  const number = (name: string): number => {
    const v = Number(configs[name]?.value);
    if (!Number.isFinite(v) || v <= 0) {
      const given = JSON.stringify(configs[name]?.value);
      throw new KafkaError("KAFKA_ADMIN", `group ${group}: ${name} is ${given}, no duration`);
    }
    return v;
  };
  return {
    sessionTimeoutMs: number("consumer.session.timeout.ms"),
    heartbeatIntervalMs: number("consumer.heartbeat.interval.ms"),
    source: "group",
  };
}
