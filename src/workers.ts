import { deliveryProviders } from "./messaging/settings.js";
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";
import type { Config } from "./config.js";
import { errorMessage, type Logger } from "./log.js";
import { startAdmin, type AdminServer } from "./observability/admin.js";
import { createRedis, reportRedisErrors } from "./redis/client.js";

/**
 * WORKERS > 1: `ringfence serve` becomes a node:cluster primary that forks WORKERS workers, each
 * running the whole app on the same ports (docs/operations.md#workers). The primary starts, replaces
 * and stops workers, and serves ADMIN_PORT for the instance: metrics gathered from every worker,
 * and readiness by a Redis connection of its own.
 *
 * Worker 1 runs the instance's scans (held-message recovery, webhook recovery sweep, API-key
 * index); a worker that replaces it takes them over, since the slot, not the process, carries
 * them. Everything else runs in every worker, coordinated through Redis (see startApp).
 *
 * Log lines of a worker carry `worker` (its slot) and `pid`; the primary's carry `pid`, and name
 * the worker they are about by `slot` and `workerPid`.
 */

/** How the primary tells a worker its slot, 1 to WORKERS. */
const SLOT_ENV = "RINGFENCE_WORKER_SLOT";
/** The message a worker sends once its listeners are open. */
const STARTED = "ringfence:worker-started";

/** A worker that lived this long before it exited is replaced at once; sooner, with a backoff. */
const STABLE_AFTER_MS = 60_000;
const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** Past SHUTDOWN_GRACE_MS, how long a worker still has to exit (its own exit(1) included). */
const EXIT_MARGIN_MS = 2_000;

/** This process's slot when it is a worker of `ringfence serve`, else undefined. */
export function workerSlot(): number | undefined {
  if (!cluster.isWorker) return undefined;
  const slot = Number(process.env[SLOT_ENV]);
  return Number.isInteger(slot) && slot >= 1 ? slot : undefined;
}

/** Whether this slot runs the instance's scans (see the top of this file). */
export function hasSingletonDuties(slot: number): boolean {
  return slot === 1;
}

/**
 * Answers the primary's requests for this worker's metrics (prom-client's cluster messages) from
 * the start, with nothing until `shareMetrics` names the registry: a scrape while a worker starts
 * must not wait for it and fail.
 */
export function answerMetricsRequests(): void {
  AggregatorRegistry.setRegistries([]);
  // The constructor is what adds the worker's listener for the primary's requests.
  new AggregatorRegistry();
}

/** The registry the primary's requests are answered from, once the app has started. */
export function shareMetrics(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry]);
}

/** Tells the primary that this worker serves. */
export function reportStarted(): void {
  process.send?.({ type: STARTED });
}

interface Slot {
  index: number;
  worker: Worker | undefined;
  forkedAtMs: number;
  started: boolean;
  /** Exits in a row that came sooner than STABLE_AFTER_MS after their fork. */
  quickExits: number;
  respawn: NodeJS.Timeout | undefined;
}

/**
 * Runs the primary until every worker has exited after SIGTERM/SIGINT (forwarded to each), or a
 * worker failed to start. Resolves with the exit code: 0 when every worker stopped cleanly within
 * SHUTDOWN_GRACE_MS, 1 otherwise.
 */
export function runPrimary(config: Config, log: Logger): Promise<number> {
  const slots: Slot[] = Array.from({ length: config.WORKERS }, (_, i) => ({
    index: i + 1,
    worker: undefined,
    forkedAtMs: 0,
    started: false,
    quickExits: 0,
    respawn: undefined,
  }));
  let phase: "starting" | "running" | "stopping" = "starting";
  let failed = false;
  let finish: (code: number) => void = () => undefined;
  const done = new Promise<number>((resolve) => (finish = resolve));

  log.info("ringfence primary started", { workers: config.WORKERS });
  let admin: Promise<AdminServer | undefined> = Promise.resolve(undefined);
  let closeAdmin: () => Promise<void> = () => Promise.resolve();
  if (config.ADMIN_PORT !== 0) {
    const gathered = new AggregatorRegistry();
    const redis = createRedis(config);
    reportRedisErrors(redis, log, "primary");
    // Ready while a worker serves and Redis answers a PING within a second, as a worker's own is.
    const ready = async () => {
      if (phase === "stopping" || !slots.some((s) => s.started)) return false;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => {
        timer = setTimeout(() => {
          resolve(false);
        }, 1_000);
      });
      const answered = redis.ping().then(
        () => true,
        () => false,
      );
      const up = await Promise.race([answered, late]);
      clearTimeout(timer);
      return up;
    };
    admin = startAdmin(
      { host: config.HOST, port: config.ADMIN_PORT },
      {
        metrics: async () => ({ contentType: gathered.contentType, body: await gathered.clusterMetrics() }),
        ready,
      },
      log,
    ).catch((err: unknown) => {
      log.error("ADMIN_PORT not served", { error: errorMessage(err) });
      return undefined;
    });
    closeAdmin = async () => {
      await (await admin)?.close();
      redis.disconnect();
    };
  }
  const smpp = deliveryProviders(config).filter((p) => p.kind === "smpp");
  if (smpp.length > 0) {
    log.info("each worker holds its own bind to each SMPP provider", {
      providers: smpp.map((p) => p.name),
      binds: config.WORKERS * smpp.length,
    });
  }

  const live = () => slots.filter((s) => s.worker !== undefined);

  const fork = (slot: Slot) => {
    slot.respawn = undefined;
    const worker = cluster.fork({ [SLOT_ENV]: String(slot.index) });
    slot.worker = worker;
    slot.forkedAtMs = Date.now();
    slot.started = false;
    worker.on("message", (message: unknown) => {
      if (!isStarted(message) || slot.worker !== worker) return;
      slot.started = true;
      log.info("worker started", {
        slot: slot.index,
        workerPid: worker.process.pid,
        singletonDuties: hasSingletonDuties(slot.index),
      });
      if (phase === "starting" && slots.every((s) => s.started)) {
        phase = "running";
        log.info("all workers started", { workers: slots.length });
      }
      // A signal that came while this worker started: it has its own handler now.
      if (phase === "stopping") worker.process.kill("SIGTERM");
    });
    worker.on("exit", (code, signal) => {
      if (slot.worker !== worker) return;
      slot.worker = undefined;
      exited(slot, worker, code, signal);
    });
  };

  const exited = (slot: Slot, worker: Worker, code: number | null, signal: string | null) => {
    const fields = { slot: slot.index, workerPid: worker.process.pid, code, signal };
    if (phase === "stopping") {
      if (code !== 0) {
        failed = true;
        log.warn("worker did not stop cleanly", fields);
      }
      if (live().length === 0) {
        log.info("ringfence stopped", { clean: !failed });
        void closeAdmin().finally(() => {
          finish(failed ? 1 : 0);
        });
      }
      return;
    }
    if (!slot.started && phase === "starting") {
      // As a single process would: a start that fails (Redis, a port in use) ends the service.
      log.error("worker did not start: stopping", fields);
      failed = true;
      stop("SIGTERM");
      return;
    }
    const livedMs = Date.now() - slot.forkedAtMs;
    slot.quickExits = livedMs >= STABLE_AFTER_MS ? 0 : slot.quickExits + 1;
    const delayMs =
      slot.quickExits === 0 ? 0 : Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (slot.quickExits - 1));
    log.error("worker exited unexpectedly: replacing it", { ...fields, livedMs, replaceInMs: delayMs });
    slot.respawn = setTimeout(() => {
      if (phase !== "stopping") fork(slot);
    }, delayMs);
  };

  const stop = (signal: NodeJS.Signals) => {
    if (phase === "stopping") return;
    phase = "stopping";
    for (const slot of slots) clearTimeout(slot.respawn);
    for (const slot of live()) {
      // A worker still starting has no handler yet; it is told once it reports (see fork).
      if (slot.started) slot.worker?.process.kill(signal);
    }
    if (live().length === 0) {
      void closeAdmin().finally(() => {
        finish(failed ? 1 : 0);
      });
      return;
    }
    setTimeout(() => {
      const stragglers = live();
      if (stragglers.length === 0) return;
      log.error("workers still running after SHUTDOWN_GRACE_MS: killing them", {
        slots: stragglers.map((s) => s.index),
      });
      failed = true;
      for (const slot of stragglers) slot.worker?.process.kill("SIGKILL");
    }, config.SHUTDOWN_GRACE_MS + EXIT_MARGIN_MS).unref();
  };

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    // Once: a second Ctrl-C ends the primary at once, and its workers with it.
    process.once(signal, () => {
      log.info(`${signal} received: stopping workers`);
      stop(signal);
    });
  }
  for (const slot of slots) fork(slot);
  return done;
}

function isStarted(message: unknown): boolean {
  return typeof message === "object" && message !== null && (message as { type?: unknown }).type === STARTED;
}
