import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in front of Redis that counts round trips: per connection, a burst is data from
 * the client when the server spoke last (or nothing was said yet). Commands a client writes
 * together, pipelined or sent while the answer to an earlier one is still on its way, are one
 * burst; a command written after an answer arrived (it waited for it) starts a new one.
 */
export class RedisRoundTrips {
  private bursts = 0;
  private bytes = 0;
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

  /** Bytes the clients wrote to Redis so far (commands and their arguments, as sent), over every connection. */
  written(): number {
    return this.bytes;
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
      this.bytes += d.length;
      server.write(d);
    });
    // Answers are held in order: one delayed answer holds back every later one, even after the
    // delay changes (a reply passing another would be matched to the wrong command).
    const held: { due: number; at: number; data: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const release = () => {
      timer = undefined;
      const now = performance.now();
      while (held.length > 0 && (held[0]?.due ?? 0) <= now + 0.5) {
        const next = held.shift();
        if (next === undefined) break;
        this.delayed.ms += now - next.at;
        this.delayed.n++;
        if (!client.destroyed) client.write(next.data);
      }
      const first = held[0];
      if (first !== undefined) timer = setTimeout(release, first.due - now);
    };
    server.on("data", (d: Buffer) => {
      serverSpokeLast = true;
      if (this.delayMs === 0 && held.length === 0) {
        client.write(d);
        return;
      }
      const at = performance.now();
      const last = held[held.length - 1];
      held.push({ due: Math.max(at + this.delayMs, last?.due ?? 0), at, data: d });
      timer ??= setTimeout(release, this.delayMs);
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
