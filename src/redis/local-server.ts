import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { resolve } from "node:path";
import { Redis } from "ioredis";
import type { SharedSettings } from "../settings/shared.js";
import { errorMessage, type Logger } from "../log.js";

/** Where a local redis-server keeps its data, from the working directory. */
export const LOCAL_REDIS_DIR = ".ringfence/redis";
/** How long a local redis-server has to answer a PING after it was started (its data loaded). */
const READY_WITHIN_MS = 30_000;

/** What `serve` says, in one line, when there is no Redis to reach at `address` and none to start. */
function noRedis(address: string): string {
  return (
    `no Redis answers on ${address} and no redis-server is on the PATH to start one: install Redis ` +
    "(Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or set REDIS_URL"
  );
}

/** A redis-server that `serve` started for itself, see startLocalRedis. */
export interface LocalRedis {
  pid: number;
  /** Stops it (SIGTERM: Redis writes its data out) and waits until it has exited. */
  stop(): Promise<void>;
}

/**
 * `npm start` on a developer's machine (docs/development.md#run-it-locally): outside production,
 * with neither REDIS_URL nor REDIS_CLUSTER_NODES set and nothing answering on the default address,
 * starts a redis-server there, its data in .ringfence/redis/ under the working directory, and
 * waits until it answers. Undefined when a Redis is there or named. Throws a one-line error saying
 * how to install Redis or set REDIS_URL when none is there and redis-server is not on the PATH.
 *
 * The server does not outlive the service, however the service ends: `stop` ends it with the
 * service's shutdown, and a guard (a shell reading a pipe that only the service holds open) ends
 * it when the service dies without one, even by SIGKILL. Both run in their own process group, so
 * that a Ctrl-C in the terminal reaches the service alone, which drains its calls before it stops
 * the server.
 */
export async function startLocalRedis(
  config: Pick<SharedSettings, "NODE_ENV" | "REDIS_URL" | "REDIS_CLUSTER_NODES">,
  env: NodeJS.ProcessEnv,
  log: Logger,
): Promise<LocalRedis | undefined> {
  if (config.NODE_ENV === "production" || config.REDIS_CLUSTER_NODES !== undefined) return undefined;
  if ((env.REDIS_URL ?? "") !== "") return undefined;
  // REDIS_URL unset: the config holds its default, 127.0.0.1:6379.
  const { hostname: host, port } = new URL(config.REDIS_URL);
  if (!(await refused(host, Number(port)))) return undefined;

  const missing: NodeJS.ErrnoException | undefined = spawnSync("redis-server", ["--version"]).error;
  if (missing?.code === "ENOENT") {
    throw new Error(noRedis(`${host}:${port}`));
  }

  const dir = resolve(LOCAL_REDIS_DIR);
  mkdirSync(dir, { recursive: true });
  const server = spawn(
    "redis-server",
    [
      ...["--port", port, "--bind", host, "--dir", dir, "--logfile", resolve(dir, "redis.log")],
      ...["--appendonly", "yes", "--appendfsync", "everysec"],
    ],
    { stdio: "ignore", detached: true },
  );
  const failed = await new Promise<Error | undefined>((done) => {
    server.once("spawn", () => {
      done(undefined);
    });
    server.once("error", done);
  });
  if (failed !== undefined) {
    throw new Error(`redis-server could not be started: ${failed.message}`, { cause: failed });
  }
  const pid = server.pid ?? 0;
  const guard = spawn(
    "sh",
    ["-c", 'read _; kill -TERM "$1" 2>/dev/null', "ringfence-redis-guard", String(pid)],
    { stdio: ["pipe", "ignore", "ignore"], detached: true },
  );
  // The guard never keeps the service running; its pipe stays open until the service exits.
  guard.unref();
  (guard.stdin as Socket | null)?.unref();

  let stopping = false;
  const exited = new Promise<void>((done) => {
    server.once("exit", (code, signal) => {
      guard.kill("SIGKILL");
      if (!stopping)
        log.error("the local redis-server exited", {
          redisPid: pid,
          code,
          signal,
          log: `${LOCAL_REDIS_DIR}/redis.log`,
        });
      done();
    });
  });
  const stop = async () => {
    stopping = true;
    if (server.exitCode === null && server.signalCode === null) server.kill("SIGTERM");
    await exited;
  };
  try {
    await answers(host, Number(port), server);
  } catch (err) {
    await stop();
    throw err;
  }
  log.info("started a local redis-server: REDIS_URL is unset and nothing answered on its default address", {
    redisPid: pid,
    address: `${host}:${port}`,
    dir: LOCAL_REDIS_DIR,
  });
  return {
    pid,
    stop: async () => {
      await stop();
      log.info("the local redis-server stopped", { redisPid: pid });
    },
  };
}

/** Whether a TCP connection to host:port is refused: nothing listens there. */
function refused(host: string, port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ host, port });
    socket.setTimeout(2_000);
    socket.once("connect", () => {
      socket.destroy();
      done(false);
    });
    socket.once("timeout", () => {
      socket.destroy();
      done(false);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => {
      done(err.code === "ECONNREFUSED");
    });
  });
}

/** Resolves once the server answers a PING; throws when it exits or stays silent too long. */
async function answers(host: string, port: number, server: ChildProcess): Promise<void> {
  const until = Date.now() + READY_WITHIN_MS;
  for (;;) {
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`the local redis-server exited at start: see ${LOCAL_REDIS_DIR}/redis.log`);
    }
    const probe = new Redis(port, host, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on("error", () => undefined);
    try {
      await probe.connect();
      await probe.ping();
      return;
    } catch (err) {
      if (Date.now() > until) {
        throw new Error(`the local redis-server did not answer: ${errorMessage(err)}`, { cause: err });
      }
    } finally {
      probe.disconnect();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
