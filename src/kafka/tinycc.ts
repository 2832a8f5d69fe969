/**
 * Compiling a small C routine at start with Bun's built-in TinyCC (batch-copy.ts, txn-thread.ts):
 * no build step, no compiler on the target, and it works inside the compiled binary.
 */
import { cc } from "bun:ffi";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Compiled code lives as long as the process: the object cc() returns owns it, and it must not be
// collected while anything calls into it.
const keepAlive: unknown[] = [];

/** Compiles `source`; throws when TinyCC cannot build it here (the caller falls back). */
export function compileC<S extends Parameters<typeof cc>[0]["symbols"]>(name: string, source: string, symbols: S) {
  // TinyCC reads source from a real file; the compiled binary's virtual filesystem is not one.
  const dir = mkdtempSync(join(tmpdir(), `cdr-${name}-`));
  try {
    const file = join(dir, `${name}.c`);
    writeFileSync(file, source);
    // -nostdlib: the code calls nothing by name, and a distroless image has no libc.so for TinyCC
    // to link against (only libc.so.6): without it, compiling failed there (test/image).
    const compiled = cc({ source: file, symbols, flags: ["-std=c11", "-O2", "-nostdlib"] });
    keepAlive.push(compiled);
    return compiled;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
