/**
 * An HTTP proxy in front of a ClickHouse that answers inserts itself while told to: a server short
 * of memory, busy or read-only for a moment, with the exact status, exception-code header and body
 * such a server sends. Everything else (the version, the pings, the reads of a lost answer's check)
 * reaches the real server, which stores every insert the proxy lets through.
 */
import type { Server } from "bun";

/** What the proxy answers an insert with instead of the server. */
export interface Refusal {
  status: number;
  /** X-ClickHouse-Exception-Code, as current servers send it; 18.16 sends none. */
  exceptionCode?: string;
  body: string;
  /** The body a byte every 500 ms, never ending: an endpoint that trickles its answer. */
  trickle?: boolean;
}

export class ClickHouseHttpProxy {
  readonly #server: Server<undefined>;
  #refusal: Refusal | null = null;
  /** Inserts the proxy answered itself, and inserts it let through. */
  readonly inserts = { refused: 0, passed: 0 };
  /** Each trickled answer: when it began, and when the client gave it up (performance.now()). */
  readonly trickled: Array<{ began: number; ended?: number }> = [];

  constructor(private readonly target: string) {
    this.#server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => this.#answer(req) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.#server.port}`;
  }

  /** Every insert from now on gets `r` (null: every insert reaches the server again). */
  refuseInserts(r: Refusal | null): void {
    this.#refusal = r;
  }

  stop(): void {
    this.#server.stop(true);
  }

  async #answer(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const insert = /^\s*INSERT\b/i.test(url.searchParams.get("query") ?? "");
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
    if (insert && this.#refusal) {
      this.inserts.refused++;
      const { status, exceptionCode, body: text, trickle } = this.#refusal;
      const headers: Record<string, string> = { "content-type": "text/plain; charset=UTF-8" };
      if (exceptionCode !== undefined) headers["x-clickhouse-exception-code"] = exceptionCode;
      if (!trickle) return new Response(text, { status, headers });
      const t: { began: number; ended?: number } = { began: performance.now() };
      this.trickled.push(t);
      const stream = new ReadableStream({
        async pull(c) {
          await Bun.sleep(500);
          c.enqueue(Uint8Array.of(0x20));
        },
        cancel() {
          t.ended = performance.now();
        },
      });
      req.signal.addEventListener("abort", () => (t.ended ??= performance.now()));
      return new Response(stream, { status, headers });
    }
    if (insert) this.inserts.passed++;
    const headers = new Headers(req.headers);
    headers.delete("host");
    // Passed through as the server sends it: no encoding for the proxy to undo.
    headers.delete("accept-encoding");
    const res = await fetch(`${this.target}${url.pathname}${url.search}`, { method: req.method, headers, body });
    const out = new Headers(res.headers);
    out.delete("content-encoding");
    out.delete("content-length");
    return new Response(await res.arrayBuffer(), { status: res.status, headers: out });
  }
}
