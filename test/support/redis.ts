import { scanKeys, type RedisClient } from "../../src/redis/client.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";

/** A free TCP port on loopback, as the OS hands it out. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr !== null && typeof addr === "object") resolve(addr.port);
        else reject(new Error("no port"));
      });
    });
  });
}

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
  stop(): Promise<void>;
}

export interface RedisOptions {
  /** Extra `redis-server` arguments. */
  args?: string[];
  /** Keep data across restart() with an append-only file fsynced on every write. */
  persistent?: boolean;
}

/** Starts a throwaway `redis-server` from PATH (no persistence by default) and waits until it answers. */
export async function startRedis(options: RedisOptions | string[] = {}): Promise<RedisServer> {
  const { args = [], persistent = false } = Array.isArray(options) ? { args: options } : options;
  const which = spawnSync("redis-server", ["--version"]);
  if (which.error) throw new Error("redis-server is not on PATH: install it (apt-get install redis-server)");
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ringfence-redis-"));
  const persistence = persistent
    ? ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    : ["--save", "", "--appendonly", "no"];
  const url = `redis://127.0.0.1:${port}`;
  const launch = async (): Promise<ChildProcess> => {
    const child = spawn(
      "redis-server",
      [
        ...["--port", String(port), "--bind", "127.0.0.1", ...persistence, "--dir", dir],
        ...["--enable-debug-command", "local", ...args],
      ],
      { stdio: "ignore" },
    );
    await waitFor(async () => {
      const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on("error", () => undefined);
      try {
        await probe.connect();
        await probe.ping();
        return true;
      } finally {
        probe.disconnect();
      }
    });
    return child;
  };
  let child = await launch();
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
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
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
 * The commands a Redis runs while `during` runs, each as its arguments, seen through MONITOR on a
 * connection of its own (its lines trail the answers, so the last ones are awaited briefly).
 */
export async function commandsDuring(url: string, during: () => Promise<void>): Promise<string[][]> {
  const seen: string[][] = [];
  const monitor = await new Redis(url).monitor();
  monitor.on("monitor", (_time: string, args: string[]) => {
    seen.push(args);
  });
  try {
    await during();
    await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    monitor.disconnect();
  }
  return seen;
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
