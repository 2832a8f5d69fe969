/**
 * `check`'s reading of the Kafka ACLs `run` needs (docs/security.md, "Grants and ACLs"), from what
 * the broker says this client may do with each topic and group (their authorized operations):
 * nothing is consumed, written or joined, so a deploy step learns of a missing grant before the
 * worker stops on it. The TransactionalId has no such reading; `transactionalWrite` tries one.
 */
import type { Config } from "../config.ts";
import { CdrWorkerError } from "../errors.ts";
import type { AclOperation, Admin } from "../kafka/admin.ts";
import { Producer } from "../kafka/producer.ts";
import { transactionalId, Transactions } from "../kafka/transaction.ts";
import { clientProps } from "./kafka-clients.ts";

interface Need {
  kind: "topic" | "group";
  name: string;
  ops: AclOperation[];
  /** What `run` does with it, as the line says. */
  why: string;
  /** Without it `run` still starts, doing less (said as a warning). */
  optional?: boolean;
}

/** What `run` needs of each topic and group under this configuration. */
export function kafkaNeeds(cfg: Config): Need[] {
  const { groupId: group, topicRaw: raw, topicDlq: dlq } = cfg.kafka;
  const needs: Need[] = [
    { kind: "group", name: group, ops: ["READ"], why: "join the group and commit its offsets" },
    { kind: "topic", name: raw, ops: ["READ", "DESCRIBE"], why: "consume the raw records" },
    {
      kind: "topic",
      name: raw,
      ops: ["DESCRIBE_CONFIGS"],
      why: "compare lag in time with its retention.ms",
      optional: true,
    },
    { kind: "topic", name: dlq, ops: ["WRITE", "DESCRIBE"], why: "dead-letter records" },
    { kind: "topic", name: dlq, ops: ["READ"], why: "read the DLQ in the replay check" },
  ];
  const reader = (name: string, why: string): Need => ({ kind: "group", name, ops: ["READ"], why });
  if (cfg.delivery === "exactly-once") needs.push(reader(`${group}-replay-check`, "read the DLQ in the replay check"));
  if (cfg.lagTimeIntervalMs > 0) needs.push(reader(`${group}-lag-time`, "read the age of the oldest record waiting"));
  return needs;
}

/**
 * The broker computes each operation as its authorizer decides it, implications and denials applied
 * (an ALTER_CONFIGS allowed with DESCRIBE_CONFIGS denied leaves the latter out): the set is the answer.
 */
function allows(granted: ReadonlySet<AclOperation>, op: AclOperation): boolean {
  return granted.has(op) || granted.has("ALL");
}

/**
 * Each grant `run` needs and lacks: errors for what stops it, warnings for what it does without.
 * A topic or group the client may not even describe is reported as its own refusal.
 */
export async function missingKafkaGrants(
  admin: Admin,
  cfg: Config,
): Promise<{ errors: CdrWorkerError[]; warnings: string[] }> {
  const errors: CdrWorkerError[] = [];
  const warnings: string[] = [];
  const granted = new Map<string, Set<AclOperation> | Error>();
  for (const need of kafkaNeeds(cfg)) {
    const key = `${need.kind} ${need.name}`;
    if (!granted.has(key))
      granted.set(key, await admin.authorizedOperations(need.kind, need.name).catch((e: Error) => e));
    const ops = granted.get(key)!;
    const missing = ops instanceof Error ? need.ops : need.ops.filter((op) => !allows(ops, op));
    if (missing.length === 0) continue;
    const names = missing.map((op) => op.toLowerCase().replace("_", " ")).join(", ");
    const refused = ops instanceof Error ? ` (${ops.message})` : "";
    const grant = "grant it (docs/security.md)";
    const line = `the client may not ${names} ${key}, which run needs to ${need.why}${refused}: ${grant}`;
    if (need.optional) warnings.push(line);
    else errors.push(new CdrWorkerError("KAFKA_ACCESS", line, false));
  }
  return { errors, warnings };
}

/** How long `check` gives the transaction coordinator to answer its InitProducerId. */
const INIT_TIMEOUT_MS = 15_000;

/**
 * Whether the client may write a TransactionalId of the workers' (`<group>-<instance>`): Kafka has
 * no reading of that grant, so check registers `<group>-<WORKER_INSTANCE>-check` (InitProducerId,
 * nothing produced; never a worker's own id, which would fence that worker), which the prefixed
 * ACL on `<group>-` that docs/security.md gives covers. Null when it may, else the refusal; a
 * coordinator that does not answer is a warning, not a refusal.
 */
export async function transactionalWrite(
  cfg: Config,
): Promise<{ error?: CdrWorkerError; warning?: string } | null> {
  if (cfg.delivery !== "exactly-once") return null;
  const id = `${transactionalId(cfg.kafka.groupId, cfg.workerInstance)}-check`;
  const producer = new Producer({ ...clientProps(cfg, "dlqProducer"), "transactional.id": id });
  try {
    await new Transactions(producer).init(INIT_TIMEOUT_MS);
    return null;
  } catch (e) {
    const err = e as Error & { kafkaName?: string };
    if (err.kafkaName !== "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
      return { warning: `TransactionalId ${id} not tried: ${err.message}` };
    const line =
      `the client may not write TransactionalId ${id}, which run needs (as <group>-<WORKER_INSTANCE>) to dead-letter ` +
      `under exactly-once: grant Write and Describe on the prefix ${cfg.kafka.groupId}- (docs/security.md)`;
    return { error: new CdrWorkerError("KAFKA_ACCESS", line, false) };
  } finally {
    producer.close();
  }
}
