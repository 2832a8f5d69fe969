/**
 * The current ClickHouse engine (chdb-core, provisioned into .local/chdb), driven through
 * scripts/clickhouse/chdb-run.py: it has no HTTP server, so statements go through a child process.
 */
import { rmSync } from "node:fs";
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

/**
 * A test endpoint of its own around the 26.9 engine (scripts/clickhouse/chdb-http.py), for a test
 * that needs one answering unlike the shared one (another user or password); stopped by `stop`.
 */
export async function startChdbEndpoint(opts: {
  user?: string;
  password?: string;
  /** A file of the role's GRANT statements the engine's user holds alone (chdb-http.py --grants). */
  grants?: string;
  /** The engine's data directory, to reopen one another endpoint wrote; kept by `stop`. */
  dir?: string;
}): Promise<{ url: string; stop: () => Promise<void> }> {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  const dir = opts.dir ?? `${ROOT}/.local/tmp/chdb-endpoint-${port}-${Date.now().toString(36)}`;
  const grants = opts.grants ? ["--grants", opts.grants] : [];
  const proc = Bun.spawn(
    [CHDB_PYTHON, `${ROOT}/scripts/clickhouse/chdb-http.py`, "--port", String(port), "--path", dir, "--user", opts.user ?? "default", "--password", opts.password ?? "", ...grants],
    { stdout: "ignore", stderr: "pipe" },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (!(await fetch(`${url}/ping`).then((r) => r.ok, () => false))) {
    if (proc.exitCode !== null) throw new Error(`chdb-http.py exited ${proc.exitCode}: ${await new Response(proc.stderr).text()}`);
    if (Date.now() > deadline) throw new Error("chdb-http.py did not answer /ping within 30 s");
    await Bun.sleep(50);
  }
  return {
    url,
    stop: async () => {
      proc.kill("SIGKILL");
      await proc.exited;
      if (!opts.dir) for (const d of [dir, `${dir}-spool`, `${dir}-config`]) rmSync(d, { recursive: true, force: true });
    },
  };
}
