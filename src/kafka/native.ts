/**
 * The librdkafka C API as bun:ffi symbols: the only place that names a C function.
 *
 * Library resolution, first that exists wins: `LIBRDKAFKA_PATH` (via setLibrdkafkaPath), the copy embedded by
 * `scripts/build.ts` into the compiled binary, then the project's own build in `.local/librdkafka`
 * (scripts/librdkafka/build.sh, run by provisioning). All three are the same build of the version
 * scripts/librdkafka/version.env pins; Debian's older librdkafka is never loaded by accident.
 * A library named by LIBRDKAFKA_PATH may be older: what it lacks of the admin API's offset lookups
 * (lookupSymbols) is bound apart, so it still loads, and the replay check makes blocking calls.
 *
 * The embedded copy is not handed to dlopen as it is: Bun would write it to `$TMPDIR/.bun-0-<hash>.so`,
 * a name anyone can compute from the release, open it without O_EXCL or O_NOFOLLOW, and leave it
 * there. On a shared /tmp a local user who made that name first would own the library the worker
 * loads with its secrets. It is written instead into a fresh directory of its own (mkdtemp, 0700),
 * created exclusively, loaded, and removed at once: the mapping outlives the file.
 */
import { dlopen, FFIType, type Pointer } from "bun:ffi";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaError } from "../errors.ts";

const PROJECT_BUILD = new URL("../../.local/librdkafka/lib/librdkafka.so.1", import.meta.url).pathname;

// Returns a number instead of a BigInt when the value fits: no allocation per call. The type
// names "i64" so TypeScript accepts it; callers wrap the result in Number().
const I64_FAST = FFIType.i64_fast as unknown as "i64";

const symbols = {
  rd_kafka_version_str: { args: [], returns: "cstring" },
  rd_kafka_err2name: { args: ["i32"], returns: "cstring" },
  rd_kafka_err2str: { args: ["i32"], returns: "cstring" },
  rd_kafka_error_is_retriable: { args: ["ptr"], returns: "i32" },
  rd_kafka_mem_free: { args: ["ptr", "ptr"], returns: "void" },

  // rd_kafka_conf_t
  rd_kafka_conf_new: { args: [], returns: "ptr" },
  rd_kafka_conf_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_conf_set: { args: ["ptr", "ptr", "ptr", "ptr", "usize"], returns: "i32" },
  rd_kafka_conf_set_events: { args: ["ptr", "i32"], returns: "void" },
  rd_kafka_conf_set_rebalance_cb: { args: ["ptr", "ptr"], returns: "void" },
  rd_kafka_conf_set_error_cb: { args: ["ptr", "ptr"], returns: "void" },
  rd_kafka_conf_set_log_cb: { args: ["ptr", "ptr"], returns: "void" },
  rd_kafka_conf_set_stats_cb: { args: ["ptr", "ptr"], returns: "void" },

  // rd_kafka_t
  rd_kafka_new: { args: ["i32", "ptr", "ptr", "usize"], returns: "ptr" },
  rd_kafka_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_destroy_flags: { args: ["ptr", "i32"], returns: "void" },
  rd_kafka_name: { args: ["ptr"], returns: "cstring" },
  rd_kafka_poll: { args: ["ptr", "i32"], returns: "i32" },
  rd_kafka_set_log_queue: { args: ["ptr", "ptr"], returns: "i32" },

  // queues and events
  rd_kafka_queue_new: { args: ["ptr"], returns: "ptr" },
  rd_kafka_queue_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_queue_get_main: { args: ["ptr"], returns: "ptr" },
  rd_kafka_queue_get_consumer: { args: ["ptr"], returns: "ptr" },
  rd_kafka_queue_length: { args: ["ptr"], returns: "usize" },
  rd_kafka_queue_poll: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_queue_io_event_enable: { args: ["ptr", "i32", "ptr", "usize"], returns: "void" },
  rd_kafka_event_type: { args: ["ptr"], returns: "i32" },
  rd_kafka_event_error: { args: ["ptr"], returns: "i32" },
  rd_kafka_event_error_string: { args: ["ptr"], returns: "cstring" },
  rd_kafka_event_error_is_fatal: { args: ["ptr"], returns: "i32" },
  rd_kafka_event_log: { args: ["ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  rd_kafka_event_message_array: { args: ["ptr", "ptr", "usize"], returns: "usize" },
  rd_kafka_event_destroy: { args: ["ptr"], returns: "void" },

  // topic partition lists
  rd_kafka_topic_partition_list_new: { args: ["i32"], returns: "ptr" },
  rd_kafka_topic_partition_list_add: { args: ["ptr", "ptr", "i32"], returns: "ptr" },
  rd_kafka_topic_partition_list_destroy: { args: ["ptr"], returns: "void" },

  // consumer
  rd_kafka_poll_set_consumer: { args: ["ptr"], returns: "i32" },
  rd_kafka_subscribe: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_consume_batch_queue: { args: ["ptr", "i32", "ptr", "usize"], returns: "i64" },
  rd_kafka_message_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_message_timestamp: { args: ["ptr", "ptr"], returns: I64_FAST },
  rd_kafka_message_headers: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_header_get_all: { args: ["ptr", "usize", "ptr", "ptr", "ptr"], returns: "i32" },
  rd_kafka_topic_name: { args: ["ptr"], returns: "cstring" },
  rd_kafka_assign: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_pause_partitions: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_seek_partitions: { args: ["ptr", "ptr", "i32"], returns: "ptr" },
  rd_kafka_resume_partitions: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_incremental_assign: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_incremental_unassign: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_rebalance_protocol: { args: ["ptr"], returns: "cstring" },
  rd_kafka_assignment_lost: { args: ["ptr"], returns: "i32" },
  rd_kafka_commit: { args: ["ptr", "ptr", "i32"], returns: "i32" },
  rd_kafka_commit_queue: { args: ["ptr", "ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  rd_kafka_event_topic_partition_list: { args: ["ptr"], returns: "ptr" },
  rd_kafka_yield: { args: ["ptr"], returns: "void" },
  rd_kafka_committed: { args: ["ptr", "ptr", "i32"], returns: "i32" },
  rd_kafka_position: { args: ["ptr", "ptr"], returns: "i32" },
  rd_kafka_offsets_for_times: { args: ["ptr", "ptr", "i32"], returns: "i32" },
  rd_kafka_get_watermark_offsets: { args: ["ptr", "ptr", "i32", "ptr", "ptr"], returns: "i32" },
  rd_kafka_query_watermark_offsets: { args: ["ptr", "ptr", "i32", "ptr", "ptr", "i32"], returns: "i32" },
  rd_kafka_consumer_close_queue: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_consumer_closed: { args: ["ptr"], returns: "i32" },

  // producer
  rd_kafka_topic_new: { args: ["ptr", "ptr", "ptr"], returns: "ptr" },
  rd_kafka_topic_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_produceva: { args: ["ptr", "ptr", "usize"], returns: "ptr" },
  rd_kafka_produce_batch: { args: ["ptr", "i32", "i32", "ptr", "i32"], returns: "i32" },
  rd_kafka_flush: { args: ["ptr", "i32"], returns: "i32" },
  rd_kafka_outq_len: { args: ["ptr"], returns: "i32" },
  rd_kafka_error_code: { args: ["ptr"], returns: "i32" },
  rd_kafka_error_string: { args: ["ptr"], returns: "cstring" },
  rd_kafka_error_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_sasl_set_credentials: { args: ["ptr", "ptr", "ptr"], returns: "ptr" },
  rd_kafka_error_is_fatal: { args: ["ptr"], returns: "i32" },
  rd_kafka_error_txn_requires_abort: { args: ["ptr"], returns: "i32" },

  // transactions (KIP-98), their offsets fenced by the group's metadata (KIP-447)
  rd_kafka_init_transactions: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_begin_transaction: { args: ["ptr"], returns: "ptr" },
  rd_kafka_send_offsets_to_transaction: { args: ["ptr", "ptr", "ptr", "i32"], returns: "ptr" },
  rd_kafka_commit_transaction: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_abort_transaction: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_consumer_group_metadata: { args: ["ptr"], returns: "ptr" },
  rd_kafka_consumer_group_metadata_destroy: { args: ["ptr"], returns: "void" },

  // metadata
  rd_kafka_metadata: { args: ["ptr", "i32", "ptr", "ptr", "i32"], returns: "i32" },
  rd_kafka_metadata_destroy: { args: ["ptr"], returns: "void" },

  // admin
  rd_kafka_AdminOptions_new: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_AdminOptions_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_AdminOptions_set_operation_timeout: { args: ["ptr", "i32", "ptr", "usize"], returns: "i32" },
  rd_kafka_AdminOptions_set_request_timeout: { args: ["ptr", "i32", "ptr", "usize"], returns: "i32" },
  rd_kafka_NewTopic_new: { args: ["ptr", "i32", "i32", "ptr", "usize"], returns: "ptr" },
  rd_kafka_NewTopic_set_config: { args: ["ptr", "ptr", "ptr"], returns: "i32" },
  rd_kafka_NewTopic_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_CreateTopics: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_CreateTopics_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_CreateTopics_result_topics: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_DeleteTopic_new: { args: ["ptr"], returns: "ptr" },
  rd_kafka_DeleteTopic_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_DeleteTopics: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_DeleteTopics_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_DeleteTopics_result_topics: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_topic_result_error: { args: ["ptr"], returns: "i32" },
  rd_kafka_topic_result_error_string: { args: ["ptr"], returns: "cstring" },
  rd_kafka_topic_result_name: { args: ["ptr"], returns: "cstring" },
  rd_kafka_ConfigResource_new: { args: ["i32", "ptr"], returns: "ptr" },
  rd_kafka_ConfigResource_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_ConfigResource_set_config: { args: ["ptr", "ptr", "ptr"], returns: "i32" },
  rd_kafka_ConfigResource_configs: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_ConfigResource_error: { args: ["ptr"], returns: "i32" },
  rd_kafka_ConfigResource_error_string: { args: ["ptr"], returns: "cstring" },
  rd_kafka_ConfigResource_name: { args: ["ptr"], returns: "cstring" },
  rd_kafka_ConfigEntry_name: { args: ["ptr"], returns: "cstring" },
  rd_kafka_ConfigEntry_value: { args: ["ptr"], returns: "ptr" },
  rd_kafka_ConfigEntry_is_default: { args: ["ptr"], returns: "i32" },
  rd_kafka_ConfigEntry_source: { args: ["ptr"], returns: "i32" },
  rd_kafka_DescribeConfigs: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_DescribeConfigs_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_DescribeConfigs_result_resources: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_AlterConfigs: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_AlterConfigs_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_AlterConfigs_result_resources: { args: ["ptr", "ptr"], returns: "ptr" },
} as const;

/**
 * The admin API's offset lookups (librdkafka 2.3 and later): the replay check asks the broker
 * through them without blocking the event loop. Bound apart, so that a library named by
 * LIBRDKAFKA_PATH that lacks them still loads; the check then makes the blocking calls.
 */
const lookupSymbols = {
  rd_kafka_AdminOptions_set_require_stable_offsets: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_AdminOptions_set_isolation_level: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_ListOffsets: { args: ["ptr", "ptr", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_ListOffsets_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_ListOffsets_result_infos: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_ListOffsetsResultInfo_topic_partition: { args: ["ptr"], returns: "ptr" },
  rd_kafka_ListConsumerGroupOffsets_new: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_ListConsumerGroupOffsets_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_ListConsumerGroupOffsets: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_ListConsumerGroupOffsets_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_ListConsumerGroupOffsets_result_groups: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_group_result_error: { args: ["ptr"], returns: "ptr" },
  rd_kafka_group_result_partitions: { args: ["ptr"], returns: "ptr" },
  rd_kafka_TopicCollection_of_topic_names: { args: ["ptr", "usize"], returns: "ptr" },
  rd_kafka_TopicCollection_destroy: { args: ["ptr"], returns: "void" },
  rd_kafka_DescribeTopics: { args: ["ptr", "ptr", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_DescribeTopics_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_DescribeTopics_result_topics: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_TopicDescription_partitions: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_TopicDescription_error: { args: ["ptr"], returns: "ptr" },
  // What the broker lets this client do with a topic or a group (`check`).
  rd_kafka_AdminOptions_set_include_authorized_operations: { args: ["ptr", "i32"], returns: "ptr" },
  rd_kafka_TopicDescription_authorized_operations: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_DescribeConsumerGroups: { args: ["ptr", "ptr", "usize", "ptr", "ptr"], returns: "void" },
  rd_kafka_event_DescribeConsumerGroups_result: { args: ["ptr"], returns: "ptr" },
  rd_kafka_DescribeConsumerGroups_result_groups: { args: ["ptr", "ptr"], returns: "ptr" },
  rd_kafka_ConsumerGroupDescription_error: { args: ["ptr"], returns: "ptr" },
  rd_kafka_ConsumerGroupDescription_authorized_operations: { args: ["ptr", "ptr"], returns: "ptr" },
} as const;

let overridePath = "";

/** LIBRDKAFKA_PATH from the configuration; call before the first rdk(). */
export function setLibrdkafkaPath(path: string): void {
  overridePath = path;
}

function candidates(): Array<{ path: string; embedded: boolean }> {
  const list: Array<{ path: string; embedded: boolean }> = [];
  if (overridePath) list.push({ path: overridePath, embedded: false });
  const embedded = (globalThis as { __CDR_EMBEDDED_LIBRDKAFKA?: string }).__CDR_EMBEDDED_LIBRDKAFKA;
  if (embedded) list.push({ path: embedded, embedded: true });
  else list.push({ path: PROJECT_BUILD, embedded: false });
  return list;
}

/** The library's symbols, and its offset lookups when it has them. */
function open(path: string) {
  const main = dlopen(path, symbols);
  let lookups: ReturnType<typeof dlopen<typeof lookupSymbols>> | null = null;
  try {
    lookups = dlopen(path, lookupSymbols);
  } catch {
    // An older library: the replay check makes the blocking calls instead.
  }
  let reportsPassedOver = false;
  try {
    // The project's build says each offset it passes over on purpose (passed-over-reports.patch).
    const probe = dlopen(path, { rd_kafka_cdr_passed_over_reports: { args: [], returns: "i32" } });
    reportsPassedOver = probe.symbols.rd_kafka_cdr_passed_over_reports() === 1;
  } catch {
    // A library without the patch: offsets passed over on purpose are told apart from skips less surely.
  }
  return { main, lookups, reportsPassedOver };
}

/** dlopen of the embedded library through a private, exclusively created copy, removed once mapped. */
function loadEmbedded(embedded: string) {
  const dir = mkdtempSync(join(tmpdir(), "cdr-worker-lib-"));
  try {
    const path = join(dir, "librdkafka.so.1");
    writeFileSync(path, readFileSync(embedded), { flag: "wx", mode: 0o500 });
    return open(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function load() {
  const tried: string[] = [];
  for (const { path, embedded } of candidates()) {
    // Embedded files live in Bun's virtual filesystem, which existsSync sees too.
    if (!existsSync(path)) {
      tried.push(`${path} (absent)`);
      continue;
    }
    try {
      return embedded ? loadEmbedded(path) : open(path);
    } catch (cause) {
      tried.push(`${path} (${(cause as Error).message})`);
    }
  }
  throw new KafkaError(
    "LIBRARY_UNAVAILABLE",
    `cannot load librdkafka; tried: ${tried.join("; ")}. ` +
      "Run scripts/provision.sh (builds it into .local/librdkafka) or set LIBRDKAFKA_PATH",
  );
}

// bun-types declare pointer returns as `Pointer | bigint | null`; on x86_64 user-space addresses
// fit in 47 bits, so Bun always hands back a number. Narrow the type once here.
type NarrowPointer<F> = F extends (...args: infer A) => infer R
  ? (...args: A) => Pointer extends R ? Exclude<R, bigint> : R
  : F;
type Loaded = ReturnType<typeof load>;
type Symbols = {
  [K in keyof Loaded["main"]["symbols"]]: NarrowPointer<Loaded["main"]["symbols"][K]>;
};
type LookupSymbols = {
  [K in keyof NonNullable<Loaded["lookups"]>["symbols"]]: NarrowPointer<NonNullable<Loaded["lookups"]>["symbols"][K]>;
};

let lib: Loaded | undefined;

/** The loaded symbols; loads the library on first use so `--help` works without it. */
export function rdk(): Symbols {
  lib ??= load();
  return lib.main.symbols as unknown as Symbols;
}

/** The admin API's offset lookups, or null when the loaded library is older than 2.3. */
export function rdkLookups(): LookupSymbols | null {
  lib ??= load();
  return lib.lookups ? (lib.lookups.symbols as unknown as LookupSymbols) : null;
}

/**
 * Whether the loaded library hands out each offset it passes over on purpose, a control record or
 * an aborted record, in its place (scripts/librdkafka/patches/passed-over-reports.patch).
 */
export function reportsPassedOver(): boolean {
  lib ??= load();
  return lib.reportsPassedOver;
}

/** The loaded librdkafka's own version string (e.g. "2.15.1"). */
export function librdkafkaVersion(): string {
  return rdk().rd_kafka_version_str() as unknown as string;
}

/** Encodes a JS string as a NUL-terminated C string for one call. */
export function cstr(s: string): Buffer {
  return Buffer.from(s + "\0", "utf8");
}
