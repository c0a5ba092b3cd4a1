import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in front of Redis that counts round trips: per connection, a burst is data from
 * the client when the server spoke last (or nothing was said yet). Commands a client writes
 * together, pipelined or sent while the answer to an earlier one is still on its way, are one
 * burst; a command written after an answer arrived (it waited for it) starts a new one.
 */
export class RedisRoundTrips {
  private bursts = 0;
  /** Holds every answer of Redis this long before passing it on (order kept): see countRedisWork. */
  delayMs = 0;
  private delayed = { ms: 0, n: 0 };
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;

  private constructor(private readonly target: { host: string; port: number }) {}

  static async start(target: {
    host: string;
    port: number;
  }): Promise<{ proxy: RedisRoundTrips; url: string }> {
    const proxy = new RedisRoundTrips(target);
    const server = createServer((client) => {
      proxy.pipe(client);
    });
    proxy.server = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const addr = server.address();
    const port = typeof addr === "object" && addr !== null ? addr.port : 0;
    return { proxy, url: `redis://127.0.0.1:${port}` };
  }

  /** Client-to-server bursts so far, over every connection. */
  count(): number {
    return this.bursts;
  }

  /** The delay answers really got since the last call (timers fire late), in ms on average. */
  takeMeanDelay(): number {
    const mean = this.delayed.n === 0 ? this.delayMs : this.delayed.ms / this.delayed.n;
    this.delayed = { ms: 0, n: 0 };
    return mean;
  }

  /** Open client connections (the service's Redis connections). */
  connections(): number {
    return this.sockets.size / 2;
  }

  private pipe(client: Socket): void {
    const server = createConnection(this.target);
    client.setNoDelay(true);
    server.setNoDelay(true);
    this.sockets.add(client).add(server);
    let serverSpokeLast = true;
    client.on("data", (d: Buffer) => {
      if (serverSpokeLast) this.bursts++;
      serverSpokeLast = false;
      server.write(d);
    });
    server.on("data", (d: Buffer) => {
      serverSpokeLast = true;
      if (this.delayMs === 0) client.write(d);
      else {
        const at = performance.now();
        setTimeout(() => {
          this.delayed.ms += performance.now() - at;
          this.delayed.n++;
          if (!client.destroyed) client.write(d);
        }, this.delayMs);
      }
    });
    const close = () => {
      client.destroy();
      server.destroy();
      this.sockets.delete(client);
      this.sockets.delete(server);
    };
    client.on("close", close).on("error", close);
    server.on("close", close).on("error", close);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => {
      if (this.server === undefined) resolve();
      else
        this.server.close(() => {
          resolve();
        });
    });
  }
}
