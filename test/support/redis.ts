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
  stop(): Promise<void>;
}

/** Starts a throwaway `redis-server` from PATH (no persistence) and waits until it answers. */
export async function startRedis(extraArgs: string[] = []): Promise<RedisServer> {
  const which = spawnSync("redis-server", ["--version"]);
  if (which.error) throw new Error("redis-server is not on PATH: install it (apt-get install redis-server)");
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ringfence-redis-"));
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extraArgs],
    { stdio: "ignore" },
  );
  const url = `redis://127.0.0.1:${port}`;
  await waitFor(async () => {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await probe.connect();
      return (await probe.ping()) === "PONG";
    } finally {
      probe.disconnect();
    }
  });
  return {
    port,
    url,
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
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
