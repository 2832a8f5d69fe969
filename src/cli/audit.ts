/**
 * `cdr-worker audit`: proves what the workers say is done. For each partition of the raw topic it
 * reconciles Kafka's records with ClickHouse's rows and the DLQ's envelopes (audit/) and prints a
 * JSON line; then a summary line. Exit 1 on any finding (audit/reconcile.ts lists them).
 */
import { collapsedReplays, reconcile, failures, FINDINGS, type PartitionFindings } from "../audit/reconcile.ts";
import { decode, payloadOf } from "../cdr/decode.ts";
import { PhoneNormalizer } from "../cdr/phone.ts";
import type { ClickHouseClient } from "@clickhouse/client";
import type { Message } from "../kafka/message.ts";
import { ascending, deadLetteredOffsets, recordOffsets, storedOffsets, type Range } from "../audit/sources.ts";
import { keepPosition, NextDlqStarts, readKeptPosition, type KeptPosition } from "../audit/position.ts";
import { PARENT_PID_VARIABLE } from "../audit/schedule.ts";
import { answeringClient } from "../clickhouse/client.ts";
import { dlqTable, offsetsTable } from "../clickhouse/migrate.ts";
import { accessRefused } from "../clickhouse/grants.ts";
import { auditDlqTable, tableExists } from "../dlq-table/audit.ts";
import type { Config } from "../config.ts";
import { CdrWorkerError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { Admin } from "../kafka/admin.ts";
import { Consumer } from "../kafka/consumer.ts";
import { endWithParent } from "../kafka/libc.ts";
import { payloadDigest } from "../dlq/provenance-mac.ts";
import { provenanceKeyOf } from "./provenance-key.ts";
import { log } from "../log.ts";
import { numberFlag, stringFlag, type ParsedArgs } from "./args.ts";
import { clientProps } from "./kafka-clients.ts";

export const AUDIT_HELP = `cdr-worker audit [--partitions 0,2] [--from-offset N] [--to-offset M]
                 [--since ISO] [--until ISO] [--resume]
  Reconciles each partition of KAFKA_TOPIC_RAW: its records (read_committed) against the stored
  offsets (<table>_offsets, which merges never collapse) and the DLQ's envelopes by source offset.
  Prints a JSON line per partition (missing, stored_twice, dead_lettered_twice,
  stored_and_dead_lettered, not_a_record, with the first offsets of each) and a summary, which also
  counts rows written before the provenance columns existed and cdr_ids stored at two offsets (a
  producer's replay: reported, not a failure). Reads the first of CLICKHOUSE_URL's endpoints that
  answers. Exit 1 on any finding. Default range: from the low watermark to the group's committed
  offset (KAFKA_GROUP_ID): what the workers say is done. --since/--until select records by timestamp
  ([since, until)); --from-offset/--to-offset by offset. Commits nothing. Progress goes to stderr on a
  terminal. Where dlq fill has filled <table>_dlq, a line more counts the DLQ topic's committed
  records (up to the filler's committed offsets) against the table's rows: missing, stored_twice,
  not_in_topic are findings too. --resume goes on from where the last --resume run ended (kept as
  the committed offsets of the group <KAFKA_GROUP_ID>-audit): the raw topic from the offsets it
  audited up to, the DLQ from the first envelope it left to this run, the DLQ table's check from
  the DLQ offsets it reached; a first run reads what the
  other flags ask, and --since reads from its time again. Records the broker deleted since the last
  run before they were audited are counted as expired (not a finding: the workers' own
  records_expired says whether they were stored).`;

export async function auditCommand(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  // Started by a worker's schedule: end with it, however it ends.
  const parent = Number(process.env[PARENT_PID_VARIABLE]);
  if (Number.isInteger(parent) && parent > 1 && !endWithParent(parent))
    log.warn("the scheduled audit could not ask to end with its worker (prctl refused)");
  const raw = cfg.kafka.topicRaw;
  const admin = new Admin(clientProps(cfg, "admin"));
  let counts: Map<string, number | null>;
  try {
    counts = admin.partitionCounts([raw, cfg.kafka.topicDlq]);
  } finally {
    admin.close();
  }
  const rawPartitions = counts.get(raw);
  const dlqPartitions = counts.get(cfg.kafka.topicDlq);
  if (rawPartitions == null) throw new CdrWorkerError("TOPOLOGY", `topic ${raw} missing`);
  if (dlqPartitions == null) throw new CdrWorkerError("TOPOLOGY", `topic ${cfg.kafka.topicDlq} missing`);
  const reader = (what: string) =>
    new Consumer({
      props: clientProps(cfg, "auditReader", `${what}-${process.pid}-${Date.now()}`),
      topics: [],
      readHeaders: what === "dlq",
    });
  const group = new Consumer({ props: clientProps(cfg, "auditGroup"), topics: [] });
  const resume = args.flags.has("resume");
  for (const f of ["partitions", "from-offset", "to-offset"])
    if (resume && args.flags.has(f))
      throw new CdrWorkerError(
        "CONFIG_INVALID",
        `--resume audits every partition from where the last run ended: not with --${f}`,
      );
  const position = resume ? new Consumer({ props: clientProps(cfg, "auditPosition"), topics: [] }) : null;
  const records = reader("raw");
  const dlq = reader("dlq");
  const ch = await answeringClient(cfg.clickhouse);
  const table = `${cfg.clickhouse.database}.${cfg.clickhouse.table}`;
  const tty = process.stderr.isTTY;
  try {
    const kept = position
      ? readKeptPosition(
          position,
          { topic: raw, partitions: rawPartitions },
          { topic: cfg.kafka.topicDlq, partitions: dlqPartitions },
        )
      : null;
    const { ranges, expired } = auditRanges(args, rawPartitions, raw, group, records, kept);
    const nextDlq = kept ? new NextDlqStarts(ranges) : null;
    const key = provenanceKeyOf(cfg);
    const progress = (read: number, total: number) => {
      if (tty) process.stderr.write(`\raudit: DLQ ${read} of ${total}`);
    };
    const started = performance.now();
    const { offsets: dead, unproven, digests, next: dlqReadTo } = await deadLetteredOffsets(
      dlq,
      cfg.kafka.topicDlq,
      dlqPartitions,
      raw,
      ranges,
      progress,
      key,
      // The kept DLQ position holds only where the raw ranges go on from it, not after --since.
      kept && nextDlq
        ? { ...(args.flags.has("since") ? {} : { starts: kept.dlq }), seen: (s, at) => nextDlq.seen(s, at) }
        : undefined,
    );
    const offsets = `${cfg.clickhouse.database}.${offsetsTable(cfg.clickhouse.table)}`;
    const stored = storedOffsets(ch, offsets, ranges);
    const totals: Record<string, number> = Object.fromEntries(FINDINGS.map((k) => [k, 0]));
    let recordsRead = 0;
    let expiredTotal = 0;
    let replaysCollapsed = 0;
    let mismatched = 0;
    const phone = new PhoneNormalizer({ defaultRegion: cfg.phone.defaultRegion });
    const ctx = { phone, recordMaxBytes: cfg.recordMaxBytes };
    const dlqSeconds = (performance.now() - started) / 1000;
    for (const r of ranges) {
      const partitionStarted = performance.now();
      let current: Message | null = null;
      // Missing offsets whose record decodes: its cdr_id may be stored at a replay's offset.
      const candidates = new Map<string, number>();
      // A proven envelope counts for the record at its offset only if it was made of that record's
      // payload (a topic made again holds other records at the same offsets).
      const proofs = digests.get(r.partition);
      const notThisRecord = (o: number): number => {
        const digest = proofs?.get(o);
        const m = current as Message | null;
        if (digest === undefined || m?.offset !== o) return 0;
        if (payloadDigest(payloadOf(decode(m.value, ctx))) === digest) return 0;
        mismatched++;
        return 1;
      };
      const f: PartitionFindings = await reconcile(
        r.partition,
        r,
        recordOffsets(records, raw, r, (m) => {
          current = m;
          if (tty && ++recordsRead % 10_000 === 0)
            process.stderr.write(`\raudit: partition ${r.partition}: offset ${m.offset} of ${r.from}…${r.to}`);
        }),
        stored.of(r.partition),
        ascending(dead.get(r.partition)),
        (o) => {
          const m = current as Message | null;
          if (m?.offset !== o || candidates.size >= MAX_REPLAY_CANDIDATES) return;
          const d = decode(m.value, ctx);
          if (d.ok) candidates.set(d.row.cdr_id, o);
        },
        notThisRecord,
      );
      if (candidates.size) collapsedReplays(f, await storedIds(ch, table, candidates));
      replaysCollapsed += f.replays_collapsed;
      for (const k of FINDINGS) totals[k]! += f[k];
      const gone = expired.get(r.partition) ?? 0;
      expiredTotal += gone;
      const seconds = Math.round(performance.now() - partitionStarted) / 1000;
      console.log(JSON.stringify({ ...f, ...(kept ? { expired: gone } : {}), seconds }));
    }
    if (tty) process.stderr.write("\n");
    const inRange =
      ranges
        .map((r) => `(kafka_partition = ${r.partition} AND kafka_offset >= ${r.from} AND kafka_offset < ${r.to})`)
        .join(" OR ") || "0";
    const scalar = async (query: string) =>
      Number(
        (
          await (
            await ch.query({
              query,
              format: "TabSeparated",
              clickhouse_settings: { max_bytes_before_external_group_by: String(1 << 30) },
            })
          ).text()
        ).trim(),
      );
    const beforeProvenance = await scalar(`SELECT count() FROM ${table} WHERE kafka_offset < 0`);
    const producerReplays = await scalar(
      `SELECT count() FROM (SELECT cdr_id FROM ${offsets} WHERE ${inRange} ` +
        "GROUP BY cdr_id HAVING uniqExact(kafka_partition, kafka_offset) > 1)",
    );
    // Under --resume the DLQ table's check too goes on from where the last run's ended.
    const tableFrom = kept && !args.flags.has("since") ? kept.dlqTable : null;
    const dlqTable = await auditFilledDlq(cfg, ch, dlqPartitions, tableFrom);
    if (dlqTable) console.log(JSON.stringify(dlqTable));
    const dlqFailed = dlqTable ? dlqTable.missing + dlqTable.stored_twice + dlqTable.not_in_topic : 0;
    const failed = failures(totals as Record<(typeof FINDINGS)[number], number>) + dlqFailed;
    console.log(
      JSON.stringify({
        audit: failed === 0 ? "clean" : "failed",
        partitions: ranges.length,
        ...totals,
        rows_before_provenance: beforeProvenance,
        producer_replays: producerReplays,
        producer_replays_collapsed: replaysCollapsed,
        // With DLQ_PROVENANCE_KEY, envelopes not counted as an audited record's: without a valid MAC
        // (forged, or written by a worker without the key), or proven for another payload than the
        // record at their offset.
        ...(key ? { unproven_envelopes: unproven, mismatched_envelopes: mismatched } : {}),
        ...(dlqTable ? { dlq_table_findings: dlqFailed } : {}),
        ...(kept ? { resumed: kept.raw.size > 0 && !args.flags.has("since"), expired: expiredTotal } : {}),
        // Where a run's time goes: the DLQ read, then the partitions (each line's own seconds).
        dlq_read_seconds: Math.round(dlqSeconds * 1000) / 1000,
        seconds: Math.round(performance.now() - started) / 1000,
      }),
    );
    if (position && nextDlq) {
      const tableTo = new Map(kept!.dlqTable);
      for (const r of dlqTable?.ranges ?? []) tableTo.set(r.partition, r.to);
      await keepPosition(position, raw, ranges, cfg.kafka.topicDlq, nextDlq.starts(dlqReadTo), tableTo);
    }
    return failed === 0 ? "OK" : "AUDIT_FINDINGS";
  } finally {
    await Promise.all([records.close(), dlq.close(), group.close(), ch.close(), position?.close()]);
  }
}

/**
 * The DLQ table against the DLQ topic, over what `dlq fill`'s group has committed; null where there
 * is no table yet or the filler has committed nothing.
 */
async function auditFilledDlq(
  cfg: Config,
  ch: ClickHouseClient,
  partitions: number,
  from: ReadonlyMap<number, number> | null,
) {
  const table = `${cfg.clickhouse.database}.${dlqTable(cfg.clickhouse.table)}`;
  // The DLQ table is its own role's (grants.ts): the worker's user may not even see it. Said, not failed.
  const notChecked = (e: unknown): null => {
    const code = accessRefused(e);
    if (code === null) throw e;
    const why =
      `ClickHouse user ${cfg.clickhouse.user} may not read ${table}: run audit as the DLQ table's user ` +
      "(migrate --dlq-role; docs/security.md) to check it";
    log.warn(why, { code });
    console.log(JSON.stringify({ dlq_table: "not_checked", why }));
    return null;
  };
  const exists = await tableExists(ch, table).catch(notChecked);
  if (!exists) return null;
  const topic = cfg.kafka.topicDlq;
  const group = new Consumer({ props: clientProps(cfg, "dlqFiller"), topics: [] });
  const reader = new Consumer({ props: clientProps(cfg, "auditReader", `dlq-table-${process.pid}`), topics: [] });
  try {
    const tps = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
    const ranges = [];
    for (const c of group.committed(tps)) {
      const to = Number(c.offset ?? -1n);
      if (to < 0) continue;
      const low = reader.queryWatermarks(topic, c.partition).low;
      const start = Math.max(low, from?.get(c.partition) ?? low);
      ranges.push({ partition: c.partition, from: Math.min(start, to), to });
    }
    if (ranges.length === 0) return null;
    return await auditDlqTable(ch, table, reader, topic, ranges).catch(notChecked);
  } finally {
    await Promise.all([group.close(), reader.close()]);
  }
}


/** Missing offsets of one partition looked up by cdr_id; past this many, the rest stay missing. */
const MAX_REPLAY_CANDIDATES = 100_000;

/** The offsets among `candidates` (cdr_id → offset) whose cdr_id has a row. */
async function storedIds(ch: ClickHouseClient, table: string, candidates: Map<string, number>): Promise<Set<number>> {
  const found = new Set<number>();
  const ids = [...candidates.keys()];
  for (let i = 0; i < ids.length; i += 1000) {
    const list = ids
      .slice(i, i + 1000)
      .map((id) => `toUUID('${id}')`)
      .join(", ");
    const rs = await ch.query({
      query: `SELECT DISTINCT toString(cdr_id) FROM ${table} WHERE cdr_id IN (${list})`,
      format: "TabSeparated",
    });
    for (const id of (await rs.text()).split("\n")) if (id) found.add(candidates.get(id)!);
  }
  return found;
}

/**
 * Each audited partition's [from, to): the selection, within the watermarks, up to what is committed;
 * with a kept position (--resume, no --since), from where the last run ended. `expired`: per
 * partition, the records between the kept position and the low watermark, deleted unaudited.
 */
function auditRanges(
  args: ParsedArgs,
  partitions: number,
  topic: string,
  group: Consumer,
  records: Consumer,
  kept: KeptPosition | null,
): { ranges: Range[]; expired: Map<number, number> } {
  const list = stringFlag(args, "partitions");
  const named = list
    ? list.split(",").map((p) => {
        const n = Number(p.trim());
        if (!Number.isInteger(n) || n < 0 || n >= partitions)
          throw new CdrWorkerError(
            "CONFIG_INVALID",
            `--partitions: ${JSON.stringify(p)} is not a partition of ${topic} (0…${partitions - 1})`,
          );
        return n;
      })
    : Array.from({ length: partitions }, (_, p) => p);
  // Ascending and once each: the stored offsets stream partition after partition (sources.ts).
  const chosen = [...new Set(named)].sort((a, b) => a - b);
  const offset = (name: string) =>
    args.flags.has(name) ? numberFlag(args, name, 0, 0, Number.MAX_SAFE_INTEGER) : null;
  const time = (name: string) => {
    const v = stringFlag(args, name);
    if (v === undefined) return null;
    const t = Date.parse(v);
    if (Number.isNaN(t)) throw new CdrWorkerError("CONFIG_INVALID", `--${name}=${v}: expected an ISO 8601 time`);
    return t;
  };
  const [fromOffset, toOffset, since, until] = [
    offset("from-offset"),
    offset("to-offset"),
    time("since"),
    time("until"),
  ];
  const committed = new Map(
    group.committed(chosen.map((partition) => ({ topic, partition }))).map((c) => [c.partition, Number(c.offset)]),
  );
  const bySince = since === null ? null : records.offsetsForTimes(topic, chosen, since);
  const byUntil = until === null ? null : records.offsetsForTimes(topic, chosen, until);
  const expired = new Map<number, number>();
  const ranges = chosen.map((partition) => {
    const w = records.queryWatermarks(topic, partition);
    const done = committed.get(partition)!;
    const last = since === null ? kept?.raw.get(partition) : undefined;
    if (last !== undefined) expired.set(partition, Math.max(0, w.low - last));
    let from = Math.max(w.low, fromOffset ?? last ?? w.low);
    let to = Math.min(w.high, toOffset ?? (done >= 0 ? done : w.low));
    const s = bySince?.get(partition);
    if (s !== undefined) from = Math.max(from, s < 0 ? w.high : s);
    const u = byUntil?.get(partition);
    if (u !== undefined && u >= 0) to = Math.min(to, u);
    return { partition, from, to: Math.max(from, to) };
  });
  return { ranges, expired };
}
