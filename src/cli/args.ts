/**
 * The command line: node:util's parseArgs in strict mode, with each command's own flags. An
 * unknown flag or a flag without its value is a usage error (exit 2 and the command's usage),
 * never ignored: `dlq replay --reasn x` must not replay the whole DLQ.
 */
import { parseArgs as parseStrict } from "node:util";
import { CdrWorkerError } from "../errors.ts";

export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string | true>;
}

/** A command line that names a flag the command does not have, or leaves one without its value. */
export class UsageError extends CdrWorkerError {
  override name = "UsageError";
  constructor(
    readonly command: string,
    message: string,
  ) {
    super("CONFIG_INVALID", message);
  }
}

const value = { type: "string" } as const;
const toggle = { type: "boolean" } as const;
/** A flag's kind: `value` takes one (`--count 5`), `toggle` none (`--dry-run`). */
export const FLAG = { value, toggle } as const;
export type FlagSpecs = Readonly<Record<string, typeof value | typeof toggle>>;

/** Every command's flags beside --help; values are checked by numberFlag, stringFlag, integerFlag. */
export const COMMAND_FLAGS: Readonly<Record<string, FlagSpecs>> = {
  run: {},
  check: { offline: toggle, wait: value },
  migrate: {
    cluster: value,
    "print-grants": toggle,
    role: value,
    user: value,
    "password-file": value,
    "dlq-role": value,
    "dlq-user": value,
    "dlq-password-file": value,
    "prune-offsets": toggle,
    "prune-dlq": toggle,
    "print-reader-grants": toggle,
    "reader-roles": toggle,
    "keep-days": value,
  },
  topics: { "replication-factor": value, partitions: value, "keep-configs": toggle, "dry-run": toggle },
  generate: {
    count: value,
    rate: value,
    "invalid-share": value,
    callers: value,
    seed: value,
    defects: value,
    "id-prefix": value,
  },
  dlq: {
    samples: value,
    reason: value,
    stage: value,
    since: value,
    until: value,
    "from-offset": value,
    "to-offset": value,
    limit: value,
    "chunk-size": value,
    "dry-run": toggle,
    where: value,
    unverified: toggle,
  },
  trace: { partition: value, offset: value },
  audit: { partitions: value, "from-offset": value, "to-offset": value, since: value, until: value, resume: toggle },
  version: {},
  probe: { post: toggle },
  help: {},
};

/** The CLI's command line: the command first (`cdr-worker topics ensure --partitions 3`), else `run`. */
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const command = argv[0] !== undefined && !argv[0].startsWith("-") ? argv[0] : "run";
  return parseFlags(argv, COMMAND_FLAGS[command] ?? {}, command);
}

/** A command line with exactly these flags (and --help); `name` names it in a usage error. */
export function parseFlags(argv: readonly string[], own: FlagSpecs, name: string): ParsedArgs {
  const command = name;
  let parsed: ReturnType<typeof parseStrict>;
  try {
    parsed = parseStrict({
      args: [...argv],
      options: { ...own, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    // node's messages name the flag: "Unknown option '--reasn'", "Option '--limit <value>' argument missing".
    throw new UsageError(command, (e as Error).message.split(". ")[0]!.replace(/\.$/, ""));
  }
  const flags = new Map<string, string | true>();
  for (const [k, v] of Object.entries(parsed.values))
    if (v !== undefined && v !== false) flags.set(k, v as string | true);
  return { positionals: parsed.positionals, flags };
}

/** A numeric flag with bounds; a bad value is a usage error (exit 2) naming the flag. */
export function numberFlag(args: ParsedArgs, name: string, dflt: number, min: number, max: number): number {
  const v = args.flags.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (v === true || v.trim() === "" || !Number.isFinite(n) || n < min || n > max)
    throw new CdrWorkerError("CONFIG_INVALID", `--${name}=${String(v)}: expected a number from ${min} to ${max}`);
  return n;
}

export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = args.flags.get(name);
  if (v === true) throw new CdrWorkerError("CONFIG_INVALID", `--${name} needs a value`);
  return v;
}

/** A whole-number flag with bounds (counts: partitions, replicas). */
export function integerFlag(args: ParsedArgs, name: string, dflt: number, min: number, max: number): number {
  const n = numberFlag(args, name, dflt, min, max);
  if (!Number.isInteger(n)) throw new CdrWorkerError("CONFIG_INVALID", `--${name}=${n}: expected a whole number`);
  return n;
}
