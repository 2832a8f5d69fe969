/** `migrate`, `topics ensure`, `topics describe`: idempotent set-up commands for operators. */
import type { ClickHouseClient } from "@clickhouse/client";
import { clickhouseUrls, createClickHouse } from "../clickhouse/client.ts";
import { DEFAULT_ROLES, dlqNeeds, readerRoleStatements, roleStatements } from "../clickhouse/grants.ts";
import { userStatements, workerNeeds } from "../clickhouse/grants.ts";
import type { Need } from "../clickhouse/grants.ts";
import { migrate } from "../clickhouse/migrate.ts";
import { dlqKeepDays, MIN_KEEP_DAYS, prunedTable, pruneTable, type Pruned } from "../clickhouse/prune.ts";
import { parseVersion } from "../clickhouse/server-version.ts";
import { CdrWorkerError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { queryText, SMALL_ANSWER_BYTES, versionOf } from "../clickhouse/answer.ts";
import { readSecretFile, type Config } from "../config.ts";
import { clientProps } from "./kafka-clients.ts";
import { Admin } from "../kafka/admin.ts";
import { integerFlag, stringFlag, type ParsedArgs } from "./args.ts";
import { ensureTopics, topologySpec } from "../topics/topology.ts";

/** How long `migrate --prune-offsets` keeps the offsets table's rows by default: two months. */
const DEFAULT_KEEP_DAYS = 62;

export const MIGRATE_HELP = `cdr-worker migrate [--cluster NAME]: create the database and table of sql/ if missing
  (idempotent), and add the columns a table made by an older release lacks (the Kafka provenance
  kafka_partition, kafka_offset; -1 in rows written before). With --cluster, ON CLUSTER NAME:
  <table>_local as ReplicatedReplacingMergeTree on every node and
  <table> as the Distributed table the worker writes to (sql/cluster.sql); over a single server's
  table it stops with one line and changes nothing (docs/upgrade.md, "From one server to a cluster").
cdr-worker migrate --print-grants [--role NAME] [--user NAME] [--dlq-role NAME] [--dlq-user NAME]: print, and
  change nothing, the statements that make role NAME (default cdr_worker) hold exactly the privileges the
  ingesting worker needs, and the DLQ role (default cdr_dlq) those of dlq fill, dlq replay, audit and trace;
  each role its user's default.
cdr-worker migrate --role NAME [--user NAME --password-file F] [--dlq-role NAME [--dlq-user NAME
  --dlq-password-file F]]: migrate, then run those statements (run as an admin; ClickHouse 20.4 or later,
  which has SQL roles); with a user, create it (or set its password) from the file's content first, on every
  endpoint of CLICKHOUSE_URL (a server keeps its own users). The worker then runs as its user, and dlq fill,
  replay and audit as theirs: CLICKHOUSE_USER, CLICKHOUSE_PASSWORD_FILE.
cdr-worker migrate --prune-offsets [--keep-days N] [--cluster NAME]: drop the monthly partitions of
  <table>_offsets whose every row is older than N days (default ${DEFAULT_KEEP_DAYS}, at least
  ${MIN_KEEP_DAYS}): what the replay check and audit read lies within the raw topic's retention, and
  18.16 has no TTL. Run it as the admin, monthly (a CronJob); prints the partitions dropped.
cdr-worker migrate --prune-dlq [--keep-days N] [--cluster NAME]: drop the daily partitions of <table>_dlq
  whose every row was stored more than N days ago (default: the DLQ topic's retention.ms, in whole
  days). Run it as the admin, daily; prints the partitions dropped.
cdr-worker migrate --print-reader-grants: print, and change nothing, the statements that make the DLQ
  table's reader roles: cdr_dlq_reader (whole envelopes, payload included) and cdr_dlq_analyst (every
  column but original_payload, and the view <table>_dlq_summary). --reader-roles runs them (as an admin,
  ClickHouse 20.4 or later); grant the roles to users yourself (docs/security.md).`;
export const TOPICS_HELP = `cdr-worker topics ensure [--replication-factor N] [--partitions N] [--keep-configs]
  [--dry-run]:
  create missing topics with the spec's settings, repair drifted configs (retention.ms included: an
  operator's retention goes back to the spec's unless --keep-configs), report (never change) a partition
  count or replication factor that differs. Idempotent; deletes nothing. --replication-factor (default 1)
  is what a topic is created with; min.insync.replicas follows each topic's own factor (2 from 3
  replicas, 1 from 2, none from 1); --partitions is the raw topic's count (default 3), the most workers
  one group can use; --keep-configs leaves an existing topic's configs as they are and reports where they
  differ from the spec ("action":"kept"); --dry-run changes nothing and reports what a run would do
  ("would-create", "would-repair" with each config's current value).
cdr-worker topics describe: print each topic's partition count and spec-relevant configs as JSON.`;

export async function migrateCommand(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const cluster = stringFlag(args, "cluster");
  const role = stringFlag(args, "role");
  const user = stringFlag(args, "user");
  const passwordFile = stringFlag(args, "password-file");
  const dlqRole = stringFlag(args, "dlq-role");
  const dlqUser = stringFlag(args, "dlq-user");
  const dlqPasswordFile = stringFlag(args, "dlq-password-file");
  const { database, table } = cfg.clickhouse;
  const pruned: Pruned | null =
    args.flags.has("prune-offsets") ? "offsets" : args.flags.has("prune-dlq") ? "dlq" : null;
  if (pruned) {
    const byDefault = pruned === "offsets" ? DEFAULT_KEEP_DAYS : await dlqRetentionDays(cfg);
    const keepDays = integerFlag(args, "keep-days", byDefault, 1, 36_500);
    const ch = createClickHouse(cfg.clickhouse, "default");
    try {
      const dropped = await pruneTable(ch, database, table, pruned, keepDays, { cluster });
      const name = `${database}.${prunedTable(pruned, table)}`;
      console.log(JSON.stringify({ table: name, keep_days: keepDays, pruned: dropped }));
      return "OK";
    } finally {
      await ch.close();
    }
  }
  if (args.flags.has("print-reader-grants")) {
    for (const s of readerRoleStatements(database, table)) console.log(`${s};`);
    return "OK";
  }
  if (args.flags.has("print-grants")) {
    const worker = roleStatements(role ?? DEFAULT_ROLES.worker, workerNeeds(database, table), user);
    const dlq = roleStatements(dlqRole ?? DEFAULT_ROLES.dlq, dlqNeeds(database, table), dlqUser);
    for (const s of [...worker, ...dlq]) console.log(`${s};`);
    return "OK";
  }
  if (user !== undefined && (role === undefined || passwordFile === undefined))
    throw new CdrWorkerError("CONFIG_INVALID", "--user needs --role and --password-file");
  if (dlqUser !== undefined && (dlqRole === undefined || dlqPasswordFile === undefined))
    throw new CdrWorkerError("CONFIG_INVALID", "--dlq-user needs --dlq-role and --dlq-password-file");
  if (dlqUser !== undefined && dlqUser === user)
    throw new CdrWorkerError("CONFIG_INVALID", "--dlq-user must differ from --user: each principal its own user");
  const password = passwordFile === undefined ? undefined : readPassword(passwordFile);
  const dlqPassword = dlqPasswordFile === undefined ? undefined : readPassword(dlqPasswordFile);
  const ch = createClickHouse(cfg.clickhouse, "default");
  try {
    const added = await migrate(ch, database, table, cluster);
    const migrated = `${database}.${table}`;
    console.log(JSON.stringify({ migrated, ...(cluster ? { cluster } : {}), columns_added: added }));
    const readerRoles = args.flags.has("reader-roles");
    if (role === undefined && dlqRole === undefined && !readerRoles) return "OK";
    // A server keeps its own users and roles: each endpoint the workers may insert through gets them,
    // or the one left without refuses the worker while the others are down.
    const endpoints: string[] = [];
    for (const url of clickhouseUrls(cfg.clickhouse.url)) {
      const each = createClickHouse(cfg.clickhouse, "default", url);
      try {
        const roles: Principals = [
          ...(role === undefined ? [] : [{ role, needs: workerNeeds(database, table), user, password }]),
          ...(dlqRole === undefined
            ? []
            : [{ role: dlqRole, needs: dlqNeeds(database, table), user: dlqUser, password: dlqPassword }]),
        ];
        await accessOn(each, { roles, readerRoles, database, table });
      } finally {
        await each.close();
      }
      endpoints.push(new URL(url).host);
    }
    const made = {
      ...(role ? { role } : {}),
      ...(user ? { user } : {}),
      ...(dlqRole ? { dlq_role: dlqRole } : {}),
      ...(dlqUser ? { dlq_user: dlqUser } : {}),
      ...(readerRoles ? { reader_roles: true } : {}),
    };
    console.log(JSON.stringify({ ...made, endpoints }));
    return "OK";
  } finally {
    await ch.close();
  }
}

/** Each principal's role with its needs, and its user with its password where one is made. */
type Principals = Array<{ role: string; needs: Need[]; user?: string | undefined; password?: string | undefined }>;

/** The principals' users and roles, and the readers' roles, on one server (20.4 or later: SQL users). */
async function accessOn(
  ch: ClickHouseClient,
  a: { roles: Principals; readerRoles: boolean; database: string; table: string },
): Promise<void> {
  const version = versionOf(await queryText(ch, "SELECT version()", SMALL_ANSWER_BYTES));
  const v = parseVersion(version);
  if (v !== null && (v[0] < 20 || (v[0] === 20 && v[1] < 4)))
    throw new CdrWorkerError(
      "CONFIG_INVALID",
      `ClickHouse ${version.trim()} has no SQL roles or users (20.4 added them): define the worker's user in ` +
        "users.xml instead (docs/security.md), and run migrate without --role",
    );
  for (const p of a.roles)
    if (p.user !== undefined && p.password !== undefined)
      for (const query of userStatements(p.user, p.password)) await ch.command({ query });
  if (a.readerRoles) for (const query of readerRoleStatements(a.database, a.table)) await ch.command({ query });
  for (const p of a.roles) for (const query of roleStatements(p.role, p.needs, p.user)) await ch.command({ query });
}

/** The DLQ topic's retention.ms in whole days: the DLQ table's window unless --keep-days says otherwise. */
async function dlqRetentionDays(cfg: Config): Promise<number> {
  const admin = new Admin(clientProps(cfg, "admin"));
  try {
    const retention = (await admin.describeConfigs(cfg.kafka.topicDlq))["retention.ms"]?.value;
    return retention == null || Number(retention) < 0 ? 36_500 : dlqKeepDays(Number(retention));
  } finally {
    admin.close();
  }
}

/** The password file, read as `<NAME>_FILE` variables are (config.ts). */
function readPassword(path: string): string {
  let password: string;
  try {
    password = readSecretFile(path);
  } catch (e) {
    throw new CdrWorkerError("CONFIG_INVALID", `--password-file ${path}: ${(e as Error).message}`);
  }
  if (!password) throw new CdrWorkerError("CONFIG_INVALID", `--password-file ${path} is empty`);
  return password;
}

export async function topicsCommand(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const sub = args.positionals[1];
  const specs = topologySpec(cfg.kafka.topicRaw, cfg.kafka.topicDlq, {
    replicationFactor: integerFlag(args, "replication-factor", 1, 1, 32),
    partitions: integerFlag(args, "partitions", 3, 1, 100_000),
  });
  const admin = new Admin(clientProps(cfg, "admin"));
  try {
    if (sub === "ensure") {
      const reports = await ensureTopics(admin, specs, {
        keepConfigs: args.flags.has("keep-configs"),
        dryRun: args.flags.has("dry-run"),
      });
      for (const r of reports) console.log(JSON.stringify(r));
      return "OK";
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
      return "OK";
    }
    console.error(TOPICS_HELP);
    return "USAGE";
  } finally {
    admin.close();
  }
}
