import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;

let commitId: string | undefined;

/**
 * The commit this build was made from, 12 hex digits: set into the executable by scripts/build.ts
 * (from CDR_COMMIT, which the image build passes, or the checkout's HEAD); run from source, the
 * checkout's HEAD; "unknown" when neither says.
 */
export function commit(): string {
  if (commitId !== undefined) return commitId;
  const built = (globalThis as { __CDR_COMMIT?: string }).__CDR_COMMIT;
  commitId = built ? built.slice(0, 12) : headOf(new URL("..", import.meta.url).pathname) ?? "unknown";
  return commitId;
}

/** HEAD of the git checkout at `dir`, 12 hex digits, or null (no git, no checkout). */
export function headOf(dir: string): string | null {
  try {
    const p = Bun.spawnSync(["git", "-C", dir, "rev-parse", "HEAD"], { stdout: "pipe", stderr: "ignore" });
    const head = p.exitCode === 0 ? p.stdout.toString().trim() : "";
    return /^[0-9a-f]{40}$/.test(head) ? head.slice(0, 12) : null;
  } catch {
    return null; // no git on this host
  }
}
