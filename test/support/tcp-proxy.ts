/** A TCP proxy that can be taken down and brought back: ClickHouse "stopped" for one test only. */
import type { Socket, TCPSocketListener } from "bun";

export class TcpProxy {
  readonly #target: { hostname: string; port: number };
  #listener: TCPSocketListener<{ peer?: Socket<any>; pending: Uint8Array[] }> | null = null;
  readonly #sockets = new Set<Socket<any>>();
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

  up(): void {
    const sockets = this.#sockets;
    const target = this.#target;
    this.#listener = Bun.listen<{ peer?: Socket<any>; pending: Uint8Array[] }>({
      hostname: "127.0.0.1",
      port: this.port,
      socket: {
        open(client) {
          client.data = { pending: [] };
          sockets.add(client);
          Bun.connect<Socket<any>>({
            ...target,
            socket: {
              open(server) {
                client.data.peer = server;
                server.data = client;
                sockets.add(server);
                for (const chunk of client.data.pending) server.write(chunk);
              },
              data(server, chunk) { server.data.write(chunk); },
              close(server) { sockets.delete(server); server.data?.end(); },
              error(server) { server.data?.end(); },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          if (client.data.peer) client.data.peer.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) { sockets.delete(client); client.data.peer?.end(); },
      },
    });
    this.port = this.#listener.port;
  }

  /** Stops listening and cuts every open connection. */
  down(): void {
    this.#listener?.stop(true);
    this.#listener = null;
    for (const s of this.#sockets) s.terminate();
    this.#sockets.clear();
  }
}
