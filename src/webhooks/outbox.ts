import { randomBytes } from "node:crypto";
import { DelayedError, Queue, UnrecoverableError, Worker, type Job } from "bullmq";
import { Cluster, type Redis } from "ioredis";
import { z } from "zod";
import { errorMessage, type Logger } from "../log.js";
import { OutboundRefused, type OutboundGuard } from "../net/outbound.js";
import { isRedisUnavailable } from "../errors.js";
import { RedisErrorReport, scanKeys, type Keys, type RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { parseHttpUrl } from "../net/validate.js";
import { EndpointScheduler, endpointOf } from "./endpoints.js";
import { SIGNATURE_HEADER, signWebhook } from "./signature.js";
import { hashTag, outboxKeys, PENDING_KIND, readEnvelopeHead, type OutboxKeys } from "./stream.js";

export interface WebhookBackoff {
  /** Delay before the first retry; doubles with every failed attempt. */
  baseMs: number;
  /** Cap on the delay between two attempts. */
  maxDelayMs: number;
  /** An envelope not delivered this long after its `created_at` is dropped (logged as an error). */
  giveUpAfterMs: number;
}

export interface WebhookOutboxOptions {
  /** Lists, counts and scripts; also, duplicated, the queue producer (so kick fails fast like any call). */
  redis: RedisClient;
  /** A new ioredis connection for the BullMQ worker (maxRetriesPerRequest: null). */
  connection: () => Redis | Cluster;
  keys: Keys;
  /** BullMQ key prefix; on Redis Cluster it must hold a hash tag, e.g. `{rf-bull}`. */
  queuePrefix: string;
  /** The secret that signs for a hook's `secret_ref`; undefined when there is none (any more). */
  resolveSecret: (secretRef: string) => Promise<string | undefined>;
  log: Logger;
  /** Calls the hooks: only allowed addresses, no redirects (OUTBOUND_ALLOWED_CIDRS). */
  outbound: OutboundGuard;
  /** Per POST, from connect to the end of the answer. Default 5 s. */
  timeoutMs?: number;
  backoff?: Partial<WebhookBackoff>;
  /** Streams delivered at once by this process. Default 8. */
  concurrency?: number;
  /**
   * Streams delivered at once to one endpoint (an owner's receiver host, see endpoints.ts) by
   * this process; keep it below `concurrency`, so that one endpoint never holds every slot. Default 2.
   */
  endpointConcurrency?: number;
  /** Longest a delivery waiting for its endpoint is put back in the queue for at a time. Default 60 s. */
  parkMaxMs?: number;
  /** Recovery sweep period after the one at start; 0: only at start. Default 5 min. */
  sweepIntervalMs?: number;
  /**
   * Whether this process runs the recovery sweeps at all. Default true. One process per instance
   * is enough (a sweep only kicks, and kicks of one stream length are one job): cluster workers
   * other than the first leave it to that one (src/workers.ts).
   */
  sweep?: boolean;
  userAgent?: string;
  /** Told of each envelope's attempt: delivered, to be retried, or dropped (given up, refused). */
  onAttempt?: (outcome: "delivered" | "retry" | "dropped") => void;
}

/** A failed attempt: BullMQ retries the job, never later than `retryUntil` (the give-up time). */
export class WebhookDeliveryError extends Error {
  override readonly name = "WebhookDeliveryError";
  constructor(
    message: string,
    readonly retryUntil: number,
  ) {
    super(message);
  }
}

/** The BullMQ queue (under queuePrefix) that holds delivery jobs. */
export const WEBHOOK_QUEUE_NAME = "webhooks";
const JOB_NAME = "deliver";
const BACKOFF_TYPE = "webhook";
/** Attempts end with giveUpAfterMs, never with a count. */
const ATTEMPTS = 1_000_000;
/** When another worker delivers the stream, look again this soon. */
const LOCK_BUSY_RETRY_MS = 200;
const JITTER = 0.2;
/** How long after a job's processing ends its outcome's write is waited for, at most, by close. */
const OUTCOME_WAIT_MS = 1_000;

const jobData = z.object({
  list: z.string().refine((list) => {
    try {
      return hashTag(list) !== "";
    } catch {
      return false;
    }
  }),
});
type DeliveryJob = z.infer<typeof jobData>;
const LIVE_STATES: readonly string[] = ["waiting", "delayed", "active", "prioritized", "waiting-children"];

const file = (name: string) => new URL(`./${name}.lua`, import.meta.url);
const advanceCursor = defineScript({
  file: file("advance-cursor"),
  keys: ["stream", "delivered", "lock"],
  argv: ["token", "expected", "count", "lockTtlMs"],
});
const finishStream = defineScript({
  file: file("finish-stream"),
  keys: ["stream", "delivered", "pending", "hook"],
  argv: [],
});
const releaseLock = defineScript({ file: file("release-lock"), keys: ["lock"], argv: ["token"] });

/**
 * At-least-once, signed, ordered-per-stream delivery of webhook streams (see stream.ts), shared by
 * the V1 authentication webhooks and the app webhooks.
 *
 * A BullMQ job only says "stream X may have envelopes to deliver" (its data is `{list}`): the
 * envelopes stay in the stream, the secret is resolved at send time, and `<list>:delivered` is the
 * one cursor. A per-stream lock keeps one delivery at a time per stream, so order holds whichever
 * job runs; a receiver that fails holds up its own stream only.
 *
 * Deliveries are scheduled per endpoint (endpoints.ts, docs/decisions.md#15-webhook-delivery): a
 * job is queued by its rank among its endpoint's recent ones, takes one of the endpoint's slots in
 * this process or is put back (without counting an attempt) until one should be free, and waits out
 * the pause of an endpoint that stopped answering: a receiver that hangs holds its own slots only.
 */
export class WebhookOutbox {
  private readonly redis: RedisClient;
  private readonly keys: Keys;
  private readonly log: Logger;
  private readonly timeoutMs: number;
  private readonly backoff: WebhookBackoff;
  private readonly lockTtlMs: number;
  private readonly endpoints: EndpointScheduler;
  private queue: Queue<DeliveryJob, string, typeof JOB_NAME> | undefined;
  private queueConnection: RedisClient | undefined;
  private worker: Worker<DeliveryJob, string, typeof JOB_NAME> | undefined;
  private workerConnection: Redis | Cluster | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> = Promise.resolve();
  /** The jobs this worker holds, by BullMQ token, each settled once BullMQ wrote its outcome. */
  private readonly inHand = new Map<string, Held>();
  private closing = false;
  private closed = false;

  constructor(private readonly options: WebhookOutboxOptions) {
    this.redis = options.redis;
    this.keys = options.keys;
    this.log = options.log;
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.backoff = {
      baseMs: options.backoff?.baseMs ?? 1_000,
      maxDelayMs: options.backoff?.maxDelayMs ?? 3_600_000,
      giveUpAfterMs: options.backoff?.giveUpAfterMs ?? 86_400_000,
    };
    // Set when taken and renewed with every envelope delivered: it only has to outlive one POST.
    this.lockTtlMs = 2 * this.timeoutMs + 10_000;
    this.endpoints = new EndpointScheduler({
      concurrency: options.endpointConcurrency ?? 2,
      pauseBaseMs: this.backoff.baseMs,
      pauseMaxMs: this.backoff.maxDelayMs,
      parkMaxMs: options.parkMaxMs ?? 60_000,
    });
    if (this.redis instanceof Cluster && !/\{[^}]+\}/.test(options.queuePrefix)) {
      throw new Error(
        `queuePrefix must hold a hash tag on Redis Cluster, e.g. "{rf-bull}" (got "${options.queuePrefix}")`,
      );
    }
  }

  /**
   * Asks for delivery of a stream; call right after a script appended to it. The job id is one per
   * (stream, length): a kick while a job of the same stream is active adds a new job, never is it
   * swallowed as a duplicate of one that may already have read the end of the stream; kicks for
   * the same length (say the domain's and the recovery sweep's) are one job. Extra jobs cost
   * little: each finds the cursor at the end, or gives way to the newest job of its stream.
   * If this throws (Redis unreachable), the event is still delivered after the next sweep.
   * The job's priority is its rank among its endpoint's recent jobs (EndpointScheduler.priority):
   * an endpoint that many events go to queues them behind the other endpoints' first ones.
   */
  async kick(listKey: string): Promise<void> {
    const { hook } = outboxKeys(listKey, this.keys);
    const [length, [url, owner]] = await Promise.all([
      this.redis.llen(listKey),
      this.redis.hmget(hook, "url", "secret_ref"),
    ]);
    if (length === 0) return;
    const endpoint = endpointOf({ url: url ?? undefined, secret_ref: owner ?? undefined });
    const priority = endpoint === undefined ? 0 : this.endpoints.priority(endpoint, Date.now());
    await this.producer().add(
      JOB_NAME,
      { list: listKey },
      { jobId: jobIdFor(listKey, length), ...(priority > 0 ? { priority } : {}) },
    );
  }

  /** Starts delivering, then kicks every stream left with undelivered envelopes (say by a crash). */
  async start(): Promise<void> {
    if (this.worker !== undefined) return;
    this.closing = false;
    this.closed = false;
    const connection = (this.workerConnection = this.options.connection());
    // The worker's errors include those of the blocking connection BullMQ duplicates from this
    // one: one report for both, told of the recovery by this connection (BullMQ's own listener
    // is gone once the worker is closed, and the connection is being closed then).
    const report = new RedisErrorReport(this.log, "webhook-worker");
    connection.on("error", () => undefined);
    connection.on("ready", () => {
      report.ready();
    });
    const worker = new Worker<DeliveryJob, string, typeof JOB_NAME>(
      WEBHOOK_QUEUE_NAME,
      (job, token) => this.hold(job, token),
      {
        connection: this.workerConnection,
        prefix: this.options.queuePrefix,
        concurrency: this.options.concurrency ?? 8,
        settings: { backoffStrategy: (attempts, _type, err) => this.retryDelay(attempts, err) },
      },
    );
    this.worker = worker;
    worker.on("error", (err) => {
      if (isRedisUnavailable(err)) report.error(err);
      else this.log.warn("webhook worker error", { error: err.message });
    });
    worker.on("completed", (job) => {
      this.release(job.token);
    });
    worker.on("failed", (job, err) => {
      this.release(job?.token);
      // Called for every failed attempt; finishedOn is only set once BullMQ gives the job up.
      if (job?.finishedOn !== undefined) {
        this.log.error("webhook job failed for good", { list: job.data.list, error: err.message });
      }
    });
    await worker.waitUntilReady();
    if (this.options.sweep === false) return;
    await this.runSweep();
    this.scheduleSweep();
  }

  /**
   * Kicks every stream of a pending set whose cursor is behind its length, and takes fully delivered
   * ones out of their set. Pending sets are found by SCAN on every master. Returns how many it kicked.
   */
  async sweep(): Promise<number> {
    let kicked = 0;
    for await (const sets of scanKeys(this.redis, this.keys.key(PENDING_KIND, "*"))) {
      for (const set of sets) {
        for (const list of await this.redis.smembers(set)) {
          if (await this.recover(list)) kicked++;
        }
      }
    }
    return kicked;
  }

  /**
   * Stops taking jobs, lets the deliveries in flight finish their POST (each then puts its job
   * back, or BullMQ records it delivered or to be retried), and closes what it opened, all by
   * `deadlineMs`. Resolves false when something was still running then and had to be cut.
   *
   * BullMQ's graceful close is not used: it waits for its blocking connection to end, and a
   * connection caught between two reconnection attempts (Redis just back from an outage) never
   * does, so the stop would hang. Once no job is in hand, that connection carries nothing to wait
   * for, and the worker is closed by force. `force` (Redis not answering): nothing can finish;
   * drop the connections at once. Either way, whatever was not delivered stays in Redis (the
   * stream, its cursor and its job) and is delivered after the next start.
   */
  async close(force = false, deadlineMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    this.closing = true;
    clearTimeout(this.sweepTimer);
    const worker = this.worker;
    this.worker = undefined;
    let clean = true;
    if (!force) {
      // Takes no new job, without waiting for anything (unlike BullMQ's own graceful stops).
      await worker?.pause(true);
      clean = await settlesBy(Promise.all([this.sweeping, this.jobsDone()]), deadlineMs);
    }
    await worker?.close(true);
    this.closed = true;
    const queue = this.queue;
    this.queue = undefined;
    const connections = [this.workerConnection, this.queueConnection];
    this.workerConnection = undefined;
    this.queueConnection = undefined;
    const closed = Promise.all([
      force ? queue?.disconnect() : queue?.close(),
      ...connections.map((c) => quit(c, force)),
    ]);
    if (!(await settlesBy(closed, deadlineMs))) {
      clean = false;
      await queue?.disconnect();
      for (const c of connections) c?.disconnect();
    }
    return clean;
  }

  /** Endpoints this process holds paused because they stopped answering. */
  pausedEndpoints(): number {
    return this.endpoints.paused(Date.now());
  }

  /** Streams waiting for delivery: queued, retrying (delayed) or being delivered. */
  async backlog(): Promise<number> {
    const counts = await this.producer().getJobCounts("waiting", "delayed", "active", "prioritized");
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  }

  private producer(): Queue<DeliveryJob, string, typeof JOB_NAME> {
    if (this.queue !== undefined) return this.queue;
    if (this.closed) throw new Error("the webhook outbox is closed");
    const connection = this.redis instanceof Cluster ? this.redis.duplicate() : this.redis.duplicate();
    const queue = new Queue<DeliveryJob, string, typeof JOB_NAME>(WEBHOOK_QUEUE_NAME, {
      connection,
      prefix: this.options.queuePrefix,
      defaultJobOptions: {
        attempts: ATTEMPTS,
        backoff: { type: BACKOFF_TYPE },
        removeOnComplete: true,
        // A job kept as failed would swallow a later kick of the same (stream, length).
        removeOnFail: true,
      },
    });
    const report = new RedisErrorReport(this.log, "webhook-queue");
    connection.on("error", () => undefined);
    connection.on("ready", () => {
      report.ready();
    });
    queue.on("error", (err) => {
      if (isRedisUnavailable(err)) report.error(err);
      else this.log.warn("webhook queue error", { error: err.message });
    });
    this.queueConnection = connection;
    this.queue = queue;
    return queue;
  }

  /** Runs a job, counted in hand until BullMQ has written its outcome (see close). */
  private async hold(job: Job<DeliveryJob, string, typeof JOB_NAME>, token?: string): Promise<string> {
    const key = token ?? "";
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const held: Held = { settled, settle };
    this.inHand.set(key, held);
    try {
      return await this.process(job, token);
    } catch (err) {
      // Put back with moveToDelayed already: BullMQ writes nothing more for it.
      if (err instanceof DelayedError) this.release(key, held);
      throw err;
    } finally {
      // BullMQ writes the outcome in one round trip and then says so ("completed", "failed");
      // should that write fail (its "error" event says why), the job is not waited for longer.
      setTimeout(() => {
        this.release(key, held);
      }, OUTCOME_WAIT_MS).unref();
    }
  }

  /** Settles the job held under `token` (only if it is still `held`, when given). */
  private release(token: string | undefined, held?: Held): void {
    const current = this.inHand.get(token ?? "");
    if (current === undefined || (held !== undefined && current !== held)) return;
    this.inHand.delete(token ?? "");
    current.settle();
  }

  /** Settles once no job is in hand (a job taken meanwhile, while closing, is put back at once). */
  private async jobsDone(): Promise<void> {
    while (this.inHand.size > 0) await Promise.all([...this.inHand.values()].map((h) => h.settled));
  }

  private async process(job: Job<DeliveryJob, string, typeof JOB_NAME>, token?: string): Promise<string> {
    // Closing: leave the job to the next worker.
    if (this.closing) return this.later(job, token, 10);
    const parsed = jobData.safeParse(job.data);
    if (!parsed.success) throw new UnrecoverableError("not a webhook delivery job");
    const { list } = parsed.data;
    const k = outboxKeys(list, this.keys);
    const [{ length, delivered }, hook] = await Promise.all([
      this.position(list, k),
      this.redis.hgetall(k.hook),
    ]);
    if (delivered >= length) {
      if (await this.finish(list, k)) return "delivered";
    } else if (await this.superseded(job, list, length)) {
      return "superseded";
    }
    // No endpoint (no hook, not http): nothing is POSTed, the delivery fails as it did before.
    const endpoint = endpointOf(hook);
    if (endpoint !== undefined) {
      const turn = this.endpoints.take(endpoint, Date.now());
      if (!turn.run) {
        this.log.debug("webhook delivery parked", { list, reason: turn.reason, delayMs: turn.delayMs });
        return this.later(job, token, turn.delayMs);
      }
    }
    try {
      const lockToken = randomBytes(16).toString("base64url");
      if ((await this.redis.set(k.lock, lockToken, "PX", this.lockTtlMs, "NX")) === null) {
        return await this.later(job, token, LOCK_BUSY_RETRY_MS);
      }
      try {
        await this.deliverStream(job, token, list, k, lockToken, hook, endpoint);
      } finally {
        await releaseLock.run(this.redis, { lock: k.lock }, { token: lockToken }).catch((err: unknown) => {
          this.log.warn("webhook lock not released; it expires", { list, error: errorMessage(err) });
        });
      }
      return "delivered";
    } finally {
      if (endpoint !== undefined) this.endpoints.done(endpoint);
    }
  }

  /** Delivers from the cursor on, in order, until the stream is fully delivered or a POST fails. */
  private async deliverStream(
    job: Job<DeliveryJob, string, typeof JOB_NAME>,
    token: string | undefined,
    list: string,
    k: OutboxKeys,
    lockToken: string,
    hook: Record<string, string>,
    endpoint: string | undefined,
  ): Promise<void> {
    let target: Promise<Target> | undefined;
    for (;;) {
      // Closing: the POST in flight has finished; the next worker takes the rest.
      if (this.closing) await this.later(job, token, 10);
      const delivered = Number((await this.redis.get(k.delivered)) ?? "0");
      const envelope = await this.redis.lindex(list, delivered);
      if (envelope === null) {
        if (await this.finish(list, k)) return;
        continue;
      }
      const advance = async () => {
        const [moved] = (await advanceCursor.run(
          this.redis,
          { stream: list, delivered: k.delivered, lock: k.lock },
          { token: lockToken, expected: delivered, count: delivered + 1, lockTtlMs: this.lockTtlMs },
        )) as ["advanced" | "lock_lost" | "count_moved", number?];
        // Our lock expired and another worker took over: let it go on, look again later.
        if (moved !== "advanced") await this.later(job, token, LOCK_BUSY_RETRY_MS);
      };
      const head = readEnvelopeHead(envelope);
      if (head === undefined) {
        this.log.error("webhook envelope unreadable, dropped", { list, index: delivered });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      target ??= this.target(hook);
      const failure = await this.post(target, envelope, head.id, list, endpoint);
      if (failure instanceof OutboundRefused) {
        // Not a passing fault: the hook's address is refused (OUTBOUND_ALLOWED_CIDRS), so no retry.
        this.log.error("webhook dropped: its address is not allowed", {
          list,
          id: head.id,
          reason: failure.message,
        });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      if (failure === undefined) {
        this.options.onAttempt?.("delivered");
        await advance();
        this.log.debug("webhook delivered", { list, id: head.id });
        continue;
      }
      const retryUntil = head.createdAtMs + this.backoff.giveUpAfterMs;
      if (Date.now() >= retryUntil) {
        this.log.error("webhook dropped: not delivered in time", { list, id: head.id, reason: failure });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      this.log.warn("webhook not delivered, will retry", { list, id: head.id, reason: failure });
      this.options.onAttempt?.("retry");
      throw new WebhookDeliveryError(`${head.id}: ${failure}`, retryUntil);
    }
  }

  /**
   * One POST; undefined when the receiver answered 2xx, an OutboundRefused when its address may
   * not be called, else why not (no URL, body or secret in it). Tells the endpoint's schedule
   * whether the receiver answered at all.
   */
  private async post(
    target: Promise<Target>,
    envelope: string,
    id: string,
    list: string,
    endpoint: string | undefined,
  ): Promise<string | OutboundRefused | undefined> {
    let started = 0;
    try {
      const { url, secret } = await target;
      started = Date.now();
      const res = await this.options.outbound.request(url, {
        method: "POST",
        body: envelope,
        timeoutMs: this.timeoutMs,
        headers: {
          "content-type": "application/json",
          "user-agent": this.options.userAgent ?? "ringfence-webhooks/1",
          [SIGNATURE_HEADER]: signWebhook(secret, envelope, Math.floor(Date.now() / 1000)),
          "X-Webhook-Id": id,
        },
      });
      this.posted(endpoint, true, started, list);
      return res.status >= 200 && res.status < 300 ? undefined : `receiver answered ${res.status}`;
    } catch (err) {
      if (err instanceof OutboundRefused) return err;
      // Started: the POST went out (its address allowed) and no answer came back.
      if (started > 0) this.posted(endpoint, false, started, list);
      return errorMessage(err);
    }
  }

  private posted(endpoint: string | undefined, answered: boolean, started: number, list: string): void {
    if (endpoint === undefined) return;
    const now = Date.now();
    const pauseMs = this.endpoints.posted(endpoint, answered, now - started, now);
    if (pauseMs !== undefined) {
      // The stream names the endpoint's owner; its URL may carry a token, so it is not logged.
      this.log.warn("webhook endpoint paused: it does not answer", { list, pauseMs });
    }
  }

  /** Where and with which secret to POST, from the stream's hook as read when the job began. */
  private async target(hook: Record<string, string>): Promise<Target> {
    if (hook.url === undefined || hook.secret_ref === undefined) throw new Error("the stream has no hook");
    const url = parseHttpUrl(hook.url);
    if (url === undefined) throw new Error("the hook's url is not http(s)");
    const secret = await this.options.resolveSecret(hook.secret_ref);
    if (secret === undefined) throw new Error("no secret for the hook's secret_ref");
    return { url, secret };
  }

  /**
   * True when a newer job of the same stream (the one for its current length) is waiting, delayed
   * or running: it delivers everything up to that length, so this one may end, and a failing
   * receiver sees one retry schedule per stream rather than one per event.
   */
  private async superseded(job: Job<DeliveryJob>, list: string, length: number): Promise<boolean> {
    const newest = jobIdFor(list, length);
    if (job.id === newest) return false;
    return LIVE_STATES.includes(await this.producer().getJobState(newest));
  }

  private async recover(list: string): Promise<boolean> {
    try {
      const k = outboxKeys(list, this.keys);
      const { length, delivered } = await this.position(list, k);
      if (delivered < length) {
        await this.kick(list);
        return true;
      }
      await this.finish(list, k);
    } catch (err) {
      this.log.warn("webhook stream not recovered", { list, error: errorMessage(err) });
    }
    return false;
  }

  private async position(list: string, k: OutboxKeys): Promise<{ length: number; delivered: number }> {
    const [length, delivered] = await Promise.all([this.redis.llen(list), this.redis.get(k.delivered)]);
    return { length, delivered: Number(delivered ?? "0") };
  }

  private async finish(list: string, k: OutboxKeys): Promise<boolean> {
    const keys = { stream: list, delivered: k.delivered, pending: k.pending, hook: k.hook };
    const [status] = (await finishStream.run(this.redis, keys, {})) as ["finished" | "pending"];
    return status === "finished";
  }

  /** Puts the job back for later without counting an attempt. */
  private async later(job: Job<DeliveryJob>, token: string | undefined, delayMs: number): Promise<never> {
    await job.moveToDelayed(Date.now() + delayMs, token);
    throw new DelayedError();
  }

  /** Exponential from baseMs, capped at maxDelayMs, minus up to 20% jitter, never past the give-up time. */
  private retryDelay(attemptsMade: number, err?: Error): number {
    const { baseMs, maxDelayMs } = this.backoff;
    const exponential = Math.min(maxDelayMs, baseMs * 2 ** Math.min(Math.max(attemptsMade - 1, 0), 40));
    let delay = Math.round(exponential * (1 - JITTER * Math.random()));
    if (err instanceof WebhookDeliveryError) delay = Math.min(delay, err.retryUntil - Date.now());
    return Math.max(1, delay);
  }

  private async runSweep(): Promise<void> {
    const run = this.sweep().then((kicked) => {
      if (kicked > 0) this.log.info("webhook streams recovered", { kicked });
    });
    this.sweeping = run.catch(() => undefined);
    await run;
  }

  private scheduleSweep(): void {
    const every = this.options.sweepIntervalMs ?? 300_000;
    if (every <= 0 || this.closing) return;
    this.sweepTimer = setTimeout(() => {
      this.runSweep()
        .catch((err: unknown) => {
          this.log.warn("webhook sweep failed", { error: errorMessage(err) });
        })
        .finally(() => {
          this.scheduleSweep();
        });
    }, every);
    this.sweepTimer.unref();
  }
}

/** A job in hand: settled once BullMQ has written its outcome. */
interface Held {
  settled: Promise<void>;
  settle: () => void;
}

interface Target {
  url: URL;
  secret: string;
}

/** BullMQ job ids may not hold ':' (list keys do) nor be integers. */
function jobIdFor(list: string, length: number): string {
  return `${encodeURIComponent(list)}@${length}`;
}

/** Whether `p` settles (either way) by `deadlineMs`. */
async function settlesBy(p: Promise<unknown>, deadlineMs: number): Promise<boolean> {
  if (deadlineMs === Number.POSITIVE_INFINITY) {
    await p.catch(() => undefined);
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(
      () => {
        resolve(false);
      },
      Math.max(0, deadlineMs - Date.now()),
    );
  });
  const settled = await Promise.race([
    p.then(
      () => true as const,
      () => true as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  return settled;
}

async function quit(connection: RedisClient | undefined, force = false): Promise<void> {
  if (connection === undefined) return;
  // BullMQ works on duplicates of the worker's connection, which may never have connected itself;
  // one that is not connected now (say still reconnecting) has nothing left to send.
  if (connection.status !== "ready" || force) {
    connection.disconnect();
    return;
  }
  try {
    await connection.quit();
  } catch {
    connection.disconnect();
  }
}
