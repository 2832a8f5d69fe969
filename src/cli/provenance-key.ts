/**
 * The DLQ provenance key the configuration names, bound to its group, DLQ topic and table: built
 * here, at the command line, so that dlq/provenance-mac.ts takes values and never the configuration.
 */
import type { Config } from "../config.ts";
import { ProvenanceKey } from "../dlq/provenance-mac.ts";

/** The configuration's key (and the previous ones) over its group, DLQ topic and table; none when unset. */
export function provenanceKeyOf(cfg: Config): ProvenanceKey | undefined {
  if (!cfg.dlq.provenanceKey) return undefined;
  const scope = {
    group: cfg.kafka.groupId,
    dlqTopic: cfg.kafka.topicDlq,
    table: `${cfg.clickhouse.database}.${cfg.clickhouse.table}`,
  };
  return new ProvenanceKey(cfg.dlq.provenanceKey, scope, cfg.dlq.previousKeys, { until: cfg.dlq.olderFormsUntil });
}
