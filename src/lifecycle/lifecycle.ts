import type { Server as HttpServer, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createGateway } from "../gateway/gateway.js";
import { startGrpc } from "../grpc/server.js";
import { blockList } from "../net/cidr.js";
import { startAdmin, type AdminServer } from "../observability/admin.js";
import { allOf, type CallObserver } from "../observability/calls.js";
import { requestLog } from "../observability/request-log.js";
import { createRedis, reportRedisErrors } from "../redis/client.js";
import type { SharedSettings } from "../settings/shared.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../observability/metrics.js";
import type { RedisClient } from "../redis/client.js";
import { loadContract } from "../rpc/contract.js";
import type { Background, Module } from "./module.js";
import { RedisWatchdog, within } from "./watchdog.js";

/** What the lifecycle takes of the process's shared parts (src/registry.ts holds them all). */
export interface Essentials {
  config: SharedSettings;
  log: Logger;
  redis: RedisClient;
  metrics: Metrics;
}

export interface RunningApp<R extends Essentials = Essentials> {
  grpcPort: number;
  /** undefined when HTTP_PORT=0 (Envoy in front instead). */
  httpPort: number | undefined;
  /** undefined when ADMIN_PORT=0, or in a cluster worker (the primary serves it). */
  adminPort: number | undefined;
  registry: R;
  /**
   * Stops taking calls, lets in-flight ones finish, then closes the modules' background work
   * (the outbox, providers) and Redis, all within SHUTDOWN_GRACE_MS. Resolves false when
   * something had to be cut at the deadline.
   */
  stop(): Promise<boolean>;
  /**
   * Resolves once the start's one-off background passes (the scans that complete indexes) have
   * ended, failed or not: what a start writes, written.
   */
  settled(): Promise<void>;
}

export interface StartOptions {
  /**
   * Whether this process runs the instance's scans: held-message recovery, the webhook recovery
   * sweep and the API-key index. Default true. With WORKERS > 1 only worker 1 (and whichever
   * worker replaces it) does, so that they are not run WORKERS times over (src/workers.ts).
   */
  singletonDuties?: boolean;
  /**
   * Whether this process serves ADMIN_PORT. Default true. Cluster workers do not: the primary
   * serves it for the instance, metrics gathered from every worker (src/workers.ts).
   */
  admin?: boolean;
}

/**
 * Starts `modules` in the order listed, then serves their bindings on both transports, and stops
 * them: what must hold before the first call, the caches that follow announced changes, the
 * background work, the Redis watchdog behind health and readiness, the calls in flight, and
 * the shutdown that closes everything in reverse within SHUTDOWN_GRACE_MS.
 */
export async function serveModules<R extends Essentials>(
  registry: R,
  modules: readonly Module[],
  options: StartOptions = {},
): Promise<RunningApp<R>> {
  const { config, log, redis } = registry;
  const started: Background[] = [];
  // Key rotations, account changes and number imports made by other instances or the CLI reach
  // this one at once (a connection of its own); each worker keeps its own copies, so each watches.
  const subscriber = createRedis(config);
  reportRedisErrors(subscriber, log, "subscriber", () => {
    registry.metrics.redisError();
  });
  let unwatches: (() => Promise<void>)[] = [];
  try {
    for (const m of modules) await m.prepare?.();
    unwatches = await Promise.all(modules.flatMap((m) => m.watched ?? []).map((w) => w.watch(subscriber)));
    // Singleton work runs in one process of an instance; the rest in every worker.
    const singleton = options.singletonDuties ?? true;
    for (const work of modules.flatMap((m) => m.background ?? [])) {
      if (work.singleton === true && !singleton) continue;
      await work.start?.();
      started.push(work);
    }
  } catch (err) {
    // What was opened for the modules (provider connections among it) does not outlive a failed start.
    const opened = modules.flatMap((m) => m.background ?? []).filter((w) => w.start === undefined);
    for (const work of [...started.filter((w) => !opened.includes(w)), ...opened].reverse()) {
      await work.close?.({ deadlineMs: Date.now(), redisAnswers: false }).catch(() => undefined);
    }
    for (const r of [redis, subscriber]) r.disconnect();
    throw err;
  }

  const bindings = modules.flatMap((m) => m.bindings ?? []);
  const contract = loadContract();
  // Told of every answered call on either transport (metrics, the request log), in this order.
  const observers: CallObserver[] = [registry.metrics.observe, requestLog(log)];
  const deps = { log, docsUrl: config.DOCS_URL, observe: allOf(observers) };
  const grpc = await startGrpc(
    bindings,
    { host: config.HOST, port: config.GRPC_PORT },
    {
      ...deps,
      descriptor: contract.bytes,
      maxReceiveBytes: config.MAX_BODY_BYTES,
      trustedProxies: blockList(config.TRUSTED_PROXY_CIDRS),
    },
  );

  let stopping = false;
  // Per process: gRPC health and /readyz answer for the worker that took the connection, by its
  // own Redis connection and its own shutdown.
  const watchdog = new RedisWatchdog(redis, log, (up) => {
    if (!stopping) grpc.setServing(up ? "SERVING" : "NOT_SERVING");
  });
  watchdog.onPing = (seconds) => {
    registry.metrics.redisPinged(seconds);
  };
  registry.metrics.redisUp = () => watchdog.up;
  const ready = () => Promise.resolve(!stopping && watchdog.up);
  grpc.setServing("SERVING");
  watchdog.start();
  // A closed socket needs no ping to know; a new one is trusted once it answers one.
  redis.on("close", () => {
    if (!stopping) watchdog.report(false);
  });
  redis.on("ready", () => {
    void watchdog.probe();
  });

  let http: HttpServer | undefined;
  const inFlight = new Set<ServerResponse>();
  if (config.HTTP_PORT !== 0) {
    http = createGateway(bindings, {
      ...deps,
      maxBodyBytes: config.MAX_BODY_BYTES,
      headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
      contract,
      ready,
    });
    const server = http;
    // Runs before the gateway's handler: once shutdown began, every answer closes its connection.
    server.prependListener("request", (_req, res: ServerResponse) => {
      if (stopping) res.setHeader("connection", "close");
      inFlight.add(res);
      res.once("close", () => inFlight.delete(res));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.HTTP_PORT, config.HOST, () => {
        resolve();
      });
    });
  }
  const httpPort = http === undefined ? undefined : (http.address() as AddressInfo).port;
  let admin: AdminServer | undefined;
  if (config.ADMIN_PORT !== 0 && (options.admin ?? true)) {
    admin = await startAdmin(
      { host: config.HOST, port: config.ADMIN_PORT },
      { metrics: () => registry.metrics.exposition(), ready },
      log,
    );
  }
  log.info("ringfence started", { grpcPort: grpc.port, httpPort, adminPort: admin?.port, host: config.HOST });

  let stopped: Promise<boolean> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // Everything, closing steps included, fits in SHUTDOWN_GRACE_MS from here; the calls in
      // flight get the grace less what closing the background work and Redis may need.
      const startedMs = Date.now();
      const deadlineMs = startedMs + config.SHUTDOWN_GRACE_MS;
      const drainEndsMs = deadlineMs - Math.min(1_000, Math.floor(config.SHUTDOWN_GRACE_MS / 4));
      // Background work in flight (webhook deliveries) may finish until shortly before the
      // deadline; what follows it (closing Redis) takes a few round trips.
      const workEndsMs = deadlineMs - Math.min(250, Math.floor(config.SHUTDOWN_GRACE_MS / 8));
      stopping = true;
      for (const work of started) work.shutdownBegins?.(drainEndsMs);
      watchdog.stop();
      grpc.setServing("NOT_SERVING");
      let clean = true;
      for (const res of inFlight) {
        if (!res.headersSent) res.setHeader("connection", "close");
      }
      const drained = Promise.all([
        new Promise<void>((resolve) => {
          grpc.server.tryShutdown(() => {
            resolve();
          });
        }),
        new Promise<void>((resolve) => {
          if (http === undefined) {
            resolve();
            return;
          }
          http.close(() => {
            resolve();
          });
          http.closeIdleConnections();
        }),
      ]);
      if (!(await within(drained, drainEndsMs - Date.now()))) {
        log.warn("shutdown grace period over: closing remaining calls");
        clean = false;
        grpc.server.forceShutdown();
        http?.closeAllConnections();
      }
      const closing = (async () => {
        for (const work of [...started].reverse()) {
          const redisAnswers = watchdog.up && redis.status === "ready";
          if ((await work.close?.({ deadlineMs: workEndsMs, redisAnswers })) === false) clean = false;
        }
        await Promise.all(unwatches.map((unwatch) => unwatch()));
        await Promise.all([redis, subscriber].map((r) => r.quit().catch(() => undefined)));
      })();
      if (!(await within(closing, deadlineMs - Date.now()))) {
        log.warn("shutdown grace period over before the outbox, providers and Redis closed");
        clean = false;
        redis.disconnect();
        subscriber.disconnect();
      }
      await admin?.close();
      log.info("ringfence stopped", { clean, tookMs: Date.now() - startedMs });
      return clean;
    })());
  const settled = async () => {
    await Promise.allSettled(started.map((work) => work.settled?.() ?? Promise.resolve()));
  };
  return { grpcPort: grpc.port, httpPort, adminPort: admin?.port, registry, stop, settled };
}
