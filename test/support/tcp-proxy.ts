/**
 * A TCP proxy that can be taken down and brought back (ClickHouse "stopped" for one test only), that
 * can lose the answer of chosen inserts after the server gave it (the client sees a reset, or no
 * answer until its timeout, while the server has stored the rows), and that can hold a chosen
 * request until the test lets it go.
 */
import type { Socket, TCPSocketListener } from "bun";

/** What becomes of the answer to the n-th insert (from 1): lost with a reset, held past the timeout, or passed. */
export type AnswerFault = (insert: number) => "reset" | "late" | null;

interface Conn {
  peer?: Socket<any>;
  pending: Uint8Array[];
  /** The request on this connection is an INSERT whose answer has not been decided on yet. */
  insert: boolean;
  /** The answer to this connection's insert is being swallowed. */
  swallowing: boolean;
}

export class TcpProxy {
  readonly #target: { hostname: string; port: number };
  #listener: TCPSocketListener<Conn> | null = null;
  readonly #sockets = new Set<Socket<any>>();
  #fault: AnswerFault = () => null;
  #inserts = 0;
  /** Answers this proxy lost, by kind. */
  readonly lost = { reset: 0, late: 0 };
  port = 0;

  constructor(targetHost: string, targetPort: number) {
    this.#target = { hostname: targetHost, port: targetPort };
  }

  /** A proxy already up in front of an HTTP service (e.g. CLICKHOUSE_URL). */
  static inFrontOf(serviceUrl: string): TcpProxy {
    const u = new URL(serviceUrl);
    const proxy = new TcpProxy(u.hostname, Number(u.port));
    proxy.up();
    return proxy;
  }

  /** The proxy's own HTTP address. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** From now on, the answers of the inserts `fault` names are lost after the server gave them. */
  loseAnswers(fault: AnswerFault): void {
    this.#fault = fault;
  }

  up(): void {
    const sockets = this.#sockets;
    const target = this.#target;
    const proxy = this;
    this.#listener = Bun.listen<Conn>({
      hostname: "127.0.0.1",
      port: this.port,
      socket: {
        open(client) {
          client.data = { pending: [], insert: false, swallowing: false };
          sockets.add(client);
          Bun.connect<Socket<Conn>>({
            ...target,
            socket: {
              open(server) {
                client.data.peer = server;
                server.data = client;
                sockets.add(server);
                for (const chunk of client.data.pending) server.write(chunk);
              },
              data(server, chunk) {
                proxy.#answer(server.data, server, chunk);
              },
              close(server) { sockets.delete(server); server.data?.end(); },
              error(server) { server.data?.end(); },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          // A request line starts a request: an insert's is `POST /?query=INSERT…`.
          const head = new TextDecoder().decode(chunk.subarray(0, Math.min(chunk.length, 2048)));
          if (/^(POST|GET) /.test(head)) client.data.insert = /[?&]query=INSERT(\+|%20)/i.test(head.split("\r\n")[0]!);
          if (proxy.#held(client, chunk)) return;
          if (client.data.peer) client.data.peer.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) { sockets.delete(client); client.data.peer?.end(); },
      },
    });
    this.port = this.#listener.port;
  }

  /**
   * Holds the first request whose bytes contain `marker`, and whatever its client sends after it,
   * until `release()`: the server sees none of it meanwhile. `seen` resolves when it arrives.
   */
  hold(marker: string): { seen: Promise<void>; release: () => void } {
    const seen = Promise.withResolvers<void>();
    const held: Array<{ client: Socket<Conn>; chunk: Uint8Array }> = [];
    let holding: Socket<Conn> | null = null;
    let released = false;
    this.#hold = (client, chunk) => {
      if (released) return false;
      if (!holding && new TextDecoder().decode(chunk).includes(marker)) {
        holding = client;
        seen.resolve();
      }
      if (client !== holding) return false;
      held.push({ client, chunk: new Uint8Array(chunk) });
      return true;
    };
    const release = () => {
      released = true;
      for (const { client, chunk } of held.splice(0)) {
        if (client.data.peer) client.data.peer.write(chunk);
        else client.data.pending.push(chunk);
      }
    };
    return { seen: seen.promise, release };
  }

  #hold: (client: Socket<Conn>, chunk: Uint8Array) => boolean = () => false;

  #held(client: Socket<Conn>, chunk: Uint8Array): boolean {
    return this.#hold(client, chunk);
  }

  /** The server's bytes for this client: passed on, or, for an insert the fault names, lost. */
  #answer(client: Socket<Conn>, server: Socket<any>, chunk: Uint8Array): void {
    const c = client.data;
    if (c.insert) {
      c.insert = false;
      const fault = this.#fault(++this.#inserts);
      if (fault === "reset") {
        this.lost.reset++;
        client.terminate();
        server.end();
        return;
      }
      if (fault === "late") {
        this.lost.late++;
        c.swallowing = true; // the client gives up at its timeout and closes; the server side then ends
      }
    }
    if (!c.swallowing) client.write(chunk);
  }

  /** Stops listening and cuts every open connection. */
  down(): void {
    this.#listener?.stop(true);
    this.#listener = null;
    for (const s of this.#sockets) s.terminate();
    this.#sockets.clear();
  }
}
