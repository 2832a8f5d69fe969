/** Minimal `--name value` / `--flag` parsing for the subcommands (no dependency needed for this). */
import { CdrWorkerError } from "../errors.ts";

export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string | true>;
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "-h") flags.set("help", true);
    else if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      if (eq > 0) flags.set(a.slice(2, eq), a.slice(eq + 1));
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) flags.set(a.slice(2), argv[++i]!);
      else flags.set(a.slice(2), true);
    } else positionals.push(a);
  }
  return { positionals, flags };
}

/** A numeric flag with bounds; a bad value is a usage error (exit 2) naming the flag. */
export function numberFlag(args: ParsedArgs, name: string, dflt: number, min: number, max: number): number {
  const v = args.flags.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (v === true || !Number.isFinite(n) || n < min || n > max)
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
