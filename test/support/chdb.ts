/**
 * The current ClickHouse engine (chdb-core, provisioned into .local/chdb), driven through
 * scripts/clickhouse/chdb-run.py: it has no HTTP server, so statements go through a child process.
 */
import { ROOT } from "./services.ts";

export const CHDB_PYTHON = `${ROOT}/.local/chdb/bin/python`;

export interface ChdbStep {
  sql: string;
}

export type ChdbResult = { ok: true; output: string } | { ok: false; error: string };

/** Runs the steps in one session persisted at `path`; resolves with each step's result. */
export async function chdb(path: string, steps: ChdbStep[]): Promise<{ version: string; results: ChdbResult[] }> {
  const proc = Bun.spawn([CHDB_PYTHON, `${ROOT}/scripts/clickhouse/chdb-run.py`], {
    stdin: new Blob([JSON.stringify({ path, steps })]),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`chdb-run.py exited ${code}: ${err}`);
  return JSON.parse(out);
}
