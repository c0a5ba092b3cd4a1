import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

/** Redis's answer to a command sent while it loads its data set after a restart. */
const LOADING = "LOADING Redis is loading the dataset in memory";

/** The commands (RESP arrays) a client wrote in `chunk`; undefined when it holds a part of one. */
function commandsIn(chunk: Buffer): Buffer[] | undefined {
  const commands: Buffer[] = [];
  let i = 0;
  const line = (): string | undefined => {
    const end = chunk.indexOf("\r\n", i);
    if (end < 0) return undefined;
    const text = chunk.toString("latin1", i, end);
    i = end + 2;
    return text;
  };
  while (i < chunk.length) {
    const start = i;
    const head = line();
    if (head?.startsWith("*") !== true) return undefined;
    for (let n = Number(head.slice(1)); n > 0; n--) {
      const size = line();
      if (size?.startsWith("$") !== true) return undefined;
      i += Number(size.slice(1)) + 2;
    }
    if (i > chunk.length) return undefined;
    commands.push(chunk.subarray(start, i));
  }
  return commands;
}

/** A command Redis answers with `error`, in its turn among the connection's answers. */
function failing(error: string): Buffer {
  const script = `return redis.error_reply('${error}')`;
  return Buffer.from(`*3\r\n$4\r\nEVAL\r\n$${String(script.length)}\r\n${script}\r\n$1\r\n0\r\n`, "latin1");
}

/**
 * A TCP proxy in front of Redis that, when told, keeps one command of its clients from Redis and
 * has it answered with Redis's LOADING error instead, as a Redis restarting at that moment would:
 * Redis runs the command in its place (an EVAL returning that error), so answers stay in order.
 */
export class FailingRedis {
  private rule: { match: (command: string) => boolean; skip: number } | undefined;
  /** The commands failed so far (each as the text of its RESP array). */
  readonly failed: string[] = [];
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(target: { host: string; port: number }): Promise<FailingRedis> {
    const ref: { self?: FailingRedis } = {};
    const server = createServer((client) => {
      const redis = createConnection(target);
      ref.self?.sockets.add(client).add(redis);
      client.on("data", (d: Buffer) => redis.write(ref.self?.filter(d) ?? d));
      redis.on("data", (d: Buffer) => client.write(d));
      const close = () => {
        client.destroy();
        redis.destroy();
      };
      client.on("close", close).on("error", close);
      redis.on("close", close).on("error", close);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new FailingRedis(server, `redis://127.0.0.1:${String(port)}`);
    ref.self = self;
    return self;
  }

  /** Fails the next command whose RESP text `match` accepts, after letting `skip` of them through. */
  failNext(match: (command: string) => boolean, skip = 0): void {
    this.rule = { match, skip };
  }

  private filter(chunk: Buffer): Buffer {
    const rule = this.rule;
    const commands = rule === undefined ? undefined : commandsIn(chunk);
    if (rule === undefined || commands === undefined) return chunk;
    return Buffer.concat(
      commands.map((c) => {
        const text = c.toString("latin1");
        if (this.rule !== rule || !rule.match(text)) return c;
        if (rule.skip > 0) {
          rule.skip--;
          return c;
        }
        this.rule = undefined;
        this.failed.push(text);
        return failing(LOADING);
      }),
    );
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
