/** `ringfence serve`: the service, in one process or, with WORKERS > 1, a primary and its workers. */
import type { Command } from "commander";
import { flushTracing } from "../observability/tracing.js";
import { loadConfig, type Config } from "../config.js";
import { createLogger, routeProcessOutput, type Logger } from "../log.js";
import { isRedisUnavailable } from "../errors.js";
import type { RunningApp } from "../app.js";
import type { LocalRedis } from "../redis/local-server.js";
import { documented } from "../command/command.js";

export function serveCommand(program: Command): void {
  documented(
    program
      .command("serve")
      .description(
        "run the gRPC server and, unless HTTP_PORT=0, the built-in REST gateway; WORKERS > 1 runs that many processes on the same ports",
      ),
    "`npm start` runs this; `npm install` builds `dist/` through `prepare`, `npm run build` rebuilds it.",
  ).action(async () => {
    const config = loadConfig();
    const { runPrimary, workerSlot } = await import("../workers.js");
    const slot = workerSlot();
    if (slot !== undefined) {
      await serveWorker(config, slot);
      return;
    }
    const primary = config.WORKERS > 1;
    const log = serveLogger(config, primary ? { pid: process.pid } : undefined);
    // No Redis named or running, outside production: one of its own (docs/development.md#run-it-locally).
    const { startLocalRedis } = await import("../redis/local-server.js");
    const localRedis = await startLocalRedis(config, process.env, log);
    if (primary) {
      const code = await runPrimary(config, log);
      await localRedis?.stop();
      await exitAfterLogs(log, code);
    }
    const { startApp } = await import("../app.js");
    const app = await startApp(config, log).catch(async (err: unknown) => {
      await localRedis?.stop();
      throw err;
    });
    // A stray rejection (say a background read while Redis is away) must not take the server down.
    process.on("unhandledRejection", (err) => {
      log[isRedisUnavailable(err) ? "warn" : "error"]("unhandled rejection", {
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    });
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      process.once(signal, () => {
        log.info(`${signal} received: draining`);
        stopAndExit(app, config, log, localRedis);
      });
    }
  });
}

/**
 * Graceful stop, then the local redis-server if `serve` started one, then exit 0; exit 1 when
 * calls were cut or SHUTDOWN_GRACE_MS ran out.
 */
function stopAndExit(app: RunningApp, config: Config, log: Logger, localRedis?: LocalRedis): void {
  // The grace period bounds everything up to the exit; past it, exit 1 says calls were cut.
  setTimeout(() => {
    log.error("shutdown did not finish within SHUTDOWN_GRACE_MS: exiting");
    void exitAfterLogs(log, 1);
  }, config.SHUTDOWN_GRACE_MS).unref();
  void app
    .stop()
    .then(async (clean) => {
      await localRedis?.stop();
      await flushTracing();
      return clean;
    })
    .then((clean) => exitAfterLogs(log, clean ? 0 : 1));
}

/** The log of `serve` in this process, so that a failed start writes its lines before exiting. */
let serveLog: Logger | undefined;

/** Writes the last lines of `serve`'s log, if this process has one, before a failed start's exit line. */
export async function closeServeLog(): Promise<void> {
  await serveLog?.close?.();
}

/**
 * The log of `serve`, which is all it writes on stderr: one JSON object a line, what libraries
 * print and process warnings included (routeProcessOutput), and an uncaught exception too, logged
 * before the process exits 1 as Node would.
 */
function serveLogger(config: Config, context?: Record<string, unknown>): Logger {
  const log = (serveLog = createLogger(config.LOG_LEVEL, undefined, context));
  routeProcessOutput(log);
  process.on("uncaughtException", (err) => {
    log.error("uncaught exception: exiting", {
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    void exitAfterLogs(log, 1);
  });
  return log;
}

/** Exits once the log's last lines are written (they go out asynchronously). */
async function exitAfterLogs(log: Logger, code: number): Promise<never> {
  await log.close?.();
  process.exit(code);
}

/**
 * One worker of `serve` with WORKERS > 1: the same app and shutdown as a single process, its log
 * lines marked with its slot and pid. Signals are taken from the start and more than once: Ctrl-C
 * reaches every process of the group and the primary forwards it too.
 */
async function serveWorker(config: Config, slot: number): Promise<void> {
  const log = serveLogger(config, { worker: slot, pid: process.pid });
  process.on("unhandledRejection", (err) => {
    log[isRedisUnavailable(err) ? "warn" : "error"]("unhandled rejection", {
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
    });
  });
  const [{ startApp }, { answerMetricsRequests, hasSingletonDuties, reportStarted, shareMetrics }] =
    await Promise.all([import("../app.js"), import("../workers.js")]);
  answerMetricsRequests();
  const starting = startApp(config, log, { singletonDuties: hasSingletonDuties(slot), admin: false });
  let signalled = false;
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (signalled) return;
      signalled = true;
      log.info(`${signal} received: draining`);
      // A signal during the start drains once the start is done; a failed start exits anyway.
      void starting.then(
        (app) => {
          stopAndExit(app, config, log);
        },
        () => undefined,
      );
    });
  }
  shareMetrics((await starting).registry.metrics.registry);
  reportStarted();
}
