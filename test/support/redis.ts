import { scanKeys, type RedisClient } from "../../src/redis/client.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { onFreshPorts, testPort } from "./ports.js";

export interface RedisServer {
  port: number;
  url: string;
  /** The server process id (for SIGSTOP/SIGCONT in fault tests). */
  pid(): number;
  /** Freezes the server (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  /** Thaws a paused server (SIGCONT). */
  resume(): void;
  /** Stops the server and starts it again on the same port and data directory. */
  restart(): Promise<void>;
  /** Stops the server, keeping its port and data directory for `up` (an outage). */
  down(): Promise<void>;
  /** Starts a server stopped by `down` again, on the same port and data directory. */
  up(): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisOptions {
  /** Extra `redis-server` arguments. */
  args?: string[];
  /** Keep data across restart() with an append-only file fsynced on every write. */
  persistent?: boolean;
}

/**
 * Starts a throwaway `redis-server` from PATH (no persistence by default) on a port of
 * test/support/ports.ts and waits until it answers; on another port when that one was taken.
 */
export async function startRedis(options: RedisOptions | string[] = {}): Promise<RedisServer> {
  const { args = [], persistent = false } = Array.isArray(options) ? { args: options } : options;
  const which = spawnSync("redis-server", ["--version"]);
  if (which.error) throw new Error("redis-server is not on PATH: install it (apt-get install redis-server)");
  const cluster = args.includes("--cluster-enabled");
  const dir = mkdtempSync(join(tmpdir(), "ringfence-redis-"));
  const persistence = persistent
    ? ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    : ["--save", "", "--appendonly", "no"];
  let port = 0;
  const launch = () => {
    const child = spawn(
      "redis-server",
      [
        ...["--port", String(port), "--bind", "127.0.0.1", ...persistence, "--dir", dir],
        ...["--enable-debug-command", "local", ...args],
      ],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    return answering(child, port);
  };
  let child = await onFreshPorts(async () => {
    port = await testPort({ bus: cluster });
    return launch();
  });
  const url = `redis://127.0.0.1:${port}`;
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGCONT");
    child.kill("SIGTERM");
    await exited;
  };
  return {
    port,
    url,
    pid: () => child.pid ?? 0,
    pause: () => {
      child.kill("SIGSTOP");
    },
    resume: () => {
      child.kill("SIGCONT");
    },
    restart: async () => {
      await kill();
      child = await launch();
    },
    down: kill,
    up: async () => {
      child = await launch();
    },
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Resolves with `child` once it answers on `port`: the server answering is this child (another
 * Redis may have taken the port meanwhile). Throws its log when it exits first, which says
 * "Address already in use" when the port was taken.
 */
async function answering(child: ChildProcess, port: number): Promise<ChildProcess> {
  let log = "";
  child.stdout?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-4_000);
  });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  try {
    await waitFor(async () => {
      if (gone()) throw new GiveUp("redis-server exited");
      const probe = new Redis(port, "127.0.0.1", {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      probe.on("error", () => undefined);
      try {
        await probe.connect();
        // PING first: it fails while the data set loads, when INFO already answers.
        await probe.ping();
        return /^process_id:(\d+)\r?$/m.exec(await probe.info("server"))?.[1] === String(child.pid);
      } finally {
        probe.disconnect();
      }
    });
  } catch (err) {
    child.kill("SIGKILL");
    // Its last lines (why it stopped) may come after its exit.
    if (child.stdout !== null && !child.stdout.closed) await once(child.stdout, "close");
    throw new Error(`redis-server did not start on port ${port}: ${log.trim()}`, { cause: err });
  }
  return child;
}

/** Thrown by a check of waitFor to stop waiting at once (say, the process waited for is gone). */
export class GiveUp extends Error {}

export async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      // not yet
    }
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface RedisCluster {
  nodes: string;
  stop(): Promise<void>;
}

/** Three masters forming a real Redis Cluster (all 16384 slots), made with `redis-cli --cluster create`. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const servers = await Promise.all(
    [0, 1, 2].map(() => startRedis({ args: ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"] })),
  );
  const addresses = servers.map((s) => `127.0.0.1:${s.port}`);
  const created = spawnSync(
    "redis-cli",
    ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"],
    { encoding: "utf8" },
  );
  if (created.status !== 0)
    throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  await waitFor(async () =>
    (
      await Promise.all(
        servers.map(async (s) => {
          const c = new Redis(s.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
          c.on("error", () => undefined);
          try {
            await c.connect();
            return String(await c.call("CLUSTER", "INFO")).includes("cluster_state:ok");
          } finally {
            c.disconnect();
          }
        }),
      )
    ).every(Boolean),
  );
  return {
    nodes: addresses.join(","),
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

/**
 * The commands a Redis runs while `during` runs, each as its arguments (commands run by its Lua
 * scripts included), seen through MONITOR on a connection of its own.
 *
 * Not ioredis's monitor(): it switches its connection to monitor mode one promise tick after the
 * MONITOR answer, so a monitored line that arrives in the same read as that answer is taken for
 * the answer to a command never sent ("Command queue state error", unhandled). On a busy machine,
 * with commands running, that happens often. This reads the RESP lines itself instead.
 *
 * MONITOR lines trail the answers of the commands they show: once `during` is done, a marker
 * (ECHO of a random word, on another connection) is run and every line up to it is kept.
 */
export async function commandsDuring(url: string, during: () => Promise<void>): Promise<string[][]> {
  const marker = `commands-during-${randomBytes(8).toString("hex")}`;
  const isMarker = (args: string[]) => args[0]?.toLowerCase() === "echo" && args[1] === marker;
  // Connected before MONITOR starts, so that its own handshake is not among the lines.
  const other = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  other.on("error", () => undefined);
  await other.connect();
  const monitor = await MonitorConnection.open(url);
  try {
    await during();
    await other.echo(marker);
    const seen = await monitor.until(isMarker);
    return seen.filter((args) => !isMarker(args));
  } finally {
    monitor.close();
    other.disconnect();
  }
}

/**
 * Calls `onCommand` with the arguments of each command the Redis at `url` runs from now on,
 * through MONITOR (see commandsDuring), until the answer is called.
 */
export async function watchCommands(url: string, onCommand: (args: string[]) => void): Promise<() => void> {
  const monitor = await MonitorConnection.open(url);
  monitor.listen(onCommand);
  return () => {
    monitor.close();
  };
}

/** A raw MONITOR connection: RESP simple-string lines, each a command with its arguments. */
class MonitorConnection {
  private readonly lines: string[][] = [];
  private listener: ((args: string[]) => void) | undefined;
  private buffered = "";
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  private constructor(private readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.buffered += chunk;
      for (let end = this.buffered.indexOf("\r\n"); end >= 0; end = this.buffered.indexOf("\r\n")) {
        this.take(this.buffered.slice(0, end));
        this.buffered = this.buffered.slice(end + 2);
      }
      this.wake?.();
    });
    socket.on("error", (err) => {
      this.failure = err;
      this.wake?.();
    });
    socket.on("close", () => {
      this.failure ??= new Error("the MONITOR connection closed");
      this.wake?.();
    });
  }

  /** Connects and waits for MONITOR's +OK: every command run after it is seen. */
  static async open(url: string): Promise<MonitorConnection> {
    const { hostname, port } = new URL(url);
    const socket = createConnection({ host: hostname, port: Number(port) });
    const monitor = new MonitorConnection(socket);
    socket.write("MONITOR\r\n");
    try {
      await monitor.next((line) => line.length === 0);
    } catch (err) {
      monitor.close();
      throw err;
    }
    return monitor;
  }

  /** The lines seen, up to and with the first that `last` matches. */
  async until(last: (args: string[]) => boolean): Promise<string[][]> {
    const seen: string[][] = [];
    await this.next((args) => {
      seen.push(args);
      return last(args);
    });
    return seen;
  }

  /** Hands every line from now on to `listener` as it arrives, instead of keeping it. */
  listen(listener: (args: string[]) => void): void {
    for (let line = this.lines.shift(); line !== undefined; line = this.lines.shift()) listener(line);
    this.listener = listener;
  }

  close(): void {
    this.socket.destroy();
  }

  /** Hands each line (the +OK as an empty one) to `done` until it answers true. */
  private async next(done: (args: string[]) => boolean): Promise<void> {
    for (;;) {
      for (let line = this.lines.shift(); line !== undefined; line = this.lines.shift()) {
        if (done(line)) return;
      }
      if (this.failure !== undefined) throw this.failure;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }

  private take(line: string): void {
    if (line.startsWith("-")) {
      this.failure = new Error(`MONITOR refused: ${line.slice(1)}`);
    } else if (line === "+OK") {
      this.lines.push([]);
    } else {
      // +<time> [<db> <client>] "arg" "arg" ...: each argument quoted as Redis's sdscatrepr does.
      const args = monitorArgs(line.slice(line.indexOf("]") + 1));
      if (this.listener === undefined) this.lines.push(args);
      else this.listener(args);
    }
  }
}

/** The arguments of a MONITOR line: `"..."` strings with \\, \", \n, \r, \t, \a, \b and \xHH escapes. */
export function monitorArgs(text: string): string[] {
  const escapes: Record<string, string> = { n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b" };
  const args: string[] = [];
  let i = text.indexOf('"');
  while (i >= 0) {
    const bytes: number[] = [];
    for (i += 1; i < text.length && text[i] !== '"'; i += 1) {
      const c = text[i] ?? "";
      if (c !== "\\") {
        bytes.push(...Buffer.from(c, "latin1"));
        continue;
      }
      const e = text[i + 1] ?? "";
      if (e === "x") {
        bytes.push(parseInt(text.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        bytes.push(...Buffer.from(escapes[e] ?? e, "latin1"));
        i += 1;
      }
    }
    args.push(Buffer.from(bytes).toString("utf8"));
    i = text.indexOf('"', i + 1);
  }
  return args;
}

/**
 * A relay in front of a Redis that can hold what its clients send: a test points an app at `url`,
 * holds, makes a call and waits until the call's command is held (`heldSeen`), so the call is
 * known to be in flight, waiting on Redis, for as long as the test needs. Connections stay open
 * while held; Redis's answers pass at all times.
 */
export interface RedisRelay {
  url: string;
  /** From now on, bytes sent by clients wait at the relay, in order, until `release`. */
  hold(): void;
  /** Resolves once the bytes held (from one client) contain `text`, e.g. a key of the call's. */
  heldSeen(text: string): Promise<void>;
  /** Sends on everything held and lets traffic through again. */
  release(): void;
  close(): Promise<void>;
}

export async function startRedisRelay(redisUrl: string): Promise<RedisRelay> {
  const { hostname, port } = new URL(redisUrl);
  let holding = false;
  const held = new Map<Socket, { upstream: Socket; chunks: Buffer[] }>();
  const watchers = new Set<{ text: string; resolve: () => void }>();
  const sockets = new Set<Socket>();
  const check = () => {
    for (const w of watchers) {
      for (const { chunks } of held.values()) {
        if (Buffer.concat(chunks).includes(w.text)) {
          watchers.delete(w);
          w.resolve();
          break;
        }
      }
    }
  };
  const server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    sockets.add(client).add(upstream);
    const pending = { upstream, chunks: [] as Buffer[] };
    held.set(client, pending);
    client.on("data", (chunk: Buffer) => {
      if (holding || pending.chunks.length > 0) {
        pending.chunks.push(chunk);
        check();
      } else {
        upstream.write(chunk);
      }
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    const end = () => {
      held.delete(client);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  if (address === null || typeof address !== "object") throw new Error("the relay has no port");
  return {
    url: `redis://127.0.0.1:${address.port}`,
    hold: () => {
      holding = true;
    },
    heldSeen: (text) =>
      new Promise<void>((resolve) => {
        watchers.add({ text, resolve });
        check();
      }),
    release: () => {
      holding = false;
      for (const pending of held.values()) {
        for (const chunk of pending.chunks.splice(0)) pending.upstream.write(chunk);
      }
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
    },
  };
}

/**
 * The keys under `prefix`, to show that a refused call wrote none. Not DBSIZE: keys of other
 * tests expire while a test runs.
 */
export async function keysUnder(redis: RedisClient, prefix: string): Promise<Set<string>> {
  const found = new Set<string>();
  for await (const batch of scanKeys(redis, `${prefix}*`)) for (const k of batch) found.add(k);
  return found;
}

/** The keys under `prefix` that `before` (a `keysUnder` reading) did not hold. */
export async function keysAddedSince(
  redis: RedisClient,
  prefix: string,
  before: ReadonlySet<string>,
): Promise<string[]> {
  return [...(await keysUnder(redis, prefix))].filter((k) => !before.has(k));
}
