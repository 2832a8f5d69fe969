/** `migrate`, `topics ensure`, `topics describe`: idempotent set-up commands for operators. */
import { createClickHouse } from "../clickhouse/client.ts";
import { migrate } from "../clickhouse/migrate.ts";
import { kafkaProps, type Config } from "../config.ts";
import { Admin } from "../kafka/admin.ts";
import { integerFlag, type ParsedArgs } from "./args.ts";
import { ensureTopics, topologySpec } from "../topics/topology.ts";

export const MIGRATE_HELP = `cdr-worker migrate [--cluster NAME]: create the database and table of sql/ if missing
  (idempotent), and add the columns a table made by an older release lacks (the Kafka provenance
  kafka_partition, kafka_offset; -1 in rows written before). With --cluster, ON CLUSTER NAME:
  <table>_local as ReplicatedReplacingMergeTree on every node and
  <table> as the Distributed table the worker writes to (sql/cluster.sql).`;
export const TOPICS_HELP = `cdr-worker topics ensure [--replication-factor N] [--partitions N] [--keep-configs]:
  create missing topics with the spec's settings, repair drifted configs, report (never change) a partition
  count that differs. Idempotent; deletes nothing. --replication-factor (default 1) also sets
  min.insync.replicas (2 from 3 replicas); --partitions is the raw topic's count (default 3), the most workers
  one group can use; --keep-configs leaves an existing topic's configs as they are and reports where they
  differ from the spec ("action":"kept").
cdr-worker topics describe: print each topic's partition count and spec-relevant configs as JSON.`;

export async function migrateCommand(cfg: Config, cluster?: string): Promise<number> {
  const ch = createClickHouse(cfg.clickhouse, "default");
  try {
    const added = await migrate(ch, cfg.clickhouse.database, cfg.clickhouse.table, cluster);
    const migrated = `${cfg.clickhouse.database}.${cfg.clickhouse.table}`;
    console.log(JSON.stringify({ migrated, ...(cluster ? { cluster } : {}), columns_added: added }));
    return 0;
  } finally {
    await ch.close();
  }
}

export async function topicsCommand(cfg: Config, args: ParsedArgs): Promise<number> {
  const sub = args.positionals[1];
  const specs = topologySpec(cfg.kafka.topicRaw, cfg.kafka.topicDlq, {
    replicationFactor: integerFlag(args, "replication-factor", 1, 1, 32),
    partitions: integerFlag(args, "partitions", 3, 1, 100_000),
  });
  const admin = new Admin(kafkaProps(cfg));
  try {
    if (sub === "ensure") {
      const reports = await ensureTopics(admin, specs, { keepConfigs: args.flags.has("keep-configs") });
      for (const r of reports) console.log(JSON.stringify(r));
      return 0;
    }
    if (sub === "describe") {
      const counts = admin.partitionCounts(specs.map((s) => s.name));
      for (const s of specs) {
        const partitions = counts.get(s.name) ?? null;
        const configs = partitions === null ? null : await admin.describeConfigs(s.name);
        const relevant =
          configs &&
          Object.fromEntries(
            ["retention.ms", "compression.type", "cleanup.policy", "min.insync.replicas"].map((k) => [
              k,
              configs[k]?.value ?? null,
            ]),
          );
        console.log(
          JSON.stringify({
            topic: s.name,
            exists: partitions !== null,
            partitions,
            configs: relevant,
            expected: { partitions: s.partitions, configs: s.configs },
          }),
        );
      }
      return 0;
    }
    console.error(TOPICS_HELP);
    return 2;
  } finally {
    admin.close();
  }
}
