/**
 * The WebhookOutbox: kicks a stream's delivery, runs the BullMQ worker that delivers (delivery.ts)
 * and the recovery sweeps (sweep.ts), and starts and closes them all.
 */
import { Worker } from "bullmq";
import { Cluster, type Redis } from "ioredis";
import type { Logger } from "../log.js";
import { isRedisUnavailable } from "../errors.js";
import { RedisErrorReport, type Keys, type RedisClient } from "../redis/client.js";
import { resolveBackoff, retryDelay } from "./backoff.js";
import { StreamDelivery } from "./delivery.js";
import { EndpointScheduler, endpointOf } from "./endpoints.js";
import { JobsInHand } from "./in-hand.js";
import type { WebhookBackoff, WebhookOutboxOptions } from "./options.js";
import {
  JOB_NAME,
  jobIdFor,
  openDeliveryQueue,
  WEBHOOK_QUEUE_NAME,
  type DeliveryJob,
  type DeliveryQueue,
  type DeliveryWorker,
} from "./queue.js";
import { quit, settlesBy } from "./shutdown.js";
import { outboxKeys } from "./keys.js";
import { RecoverySweep } from "./sweep.js";

export { WebhookDeliveryError, type WebhookBackoff, type WebhookOutboxOptions } from "./options.js";
export { WEBHOOK_QUEUE_NAME } from "./queue.js";

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
  private readonly backoff: WebhookBackoff;
  private readonly endpoints: EndpointScheduler;
  private readonly delivery: StreamDelivery;
  private readonly sweeper: RecoverySweep;
  private queue: DeliveryQueue | undefined;
  private queueConnection: RedisClient | undefined;
  private worker: DeliveryWorker | undefined;
  private workerConnection: Redis | Cluster | undefined;
  /** The jobs this worker holds, each settled once BullMQ wrote its outcome. */
  private readonly inHand = new JobsInHand();
  private closing = false;
  private closed = false;

  constructor(private readonly options: WebhookOutboxOptions) {
    this.redis = options.redis;
    this.keys = options.keys;
    this.log = options.log;
    const timeoutMs = options.timeoutMs ?? 5_000;
    this.backoff = resolveBackoff(options.backoff);
    this.endpoints = new EndpointScheduler({
      concurrency: options.endpointConcurrency ?? 2,
      pauseBaseMs: this.backoff.baseMs,
      pauseMaxMs: this.backoff.maxDelayMs,
      parkMaxMs: options.parkMaxMs ?? 60_000,
    });
    this.delivery = new StreamDelivery({
      redis: this.redis,
      keys: this.keys,
      log: this.log,
      options,
      timeoutMs,
      giveUpAfterMs: this.backoff.giveUpAfterMs,
      endpoints: this.endpoints,
      producer: () => this.producer(),
      closing: () => this.closing,
    });
    this.sweeper = new RecoverySweep({
      redis: this.redis,
      keys: this.keys,
      log: this.log,
      intervalMs: options.sweepIntervalMs ?? 300_000,
      kick: (list) => this.kick(list),
      closing: () => this.closing,
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
      (job, token) => this.inHand.hold(token, () => this.delivery.process(job, token)),
      {
        connection: this.workerConnection,
        prefix: this.options.queuePrefix,
        concurrency: this.options.concurrency ?? 8,
        settings: { backoffStrategy: (attempts, _type, err) => retryDelay(this.backoff, attempts, err) },
      },
    );
    this.worker = worker;
    worker.on("error", (err) => {
      if (isRedisUnavailable(err)) report.error(err);
      else this.log.warn("webhook worker error", { error: err.message });
    });
    worker.on("completed", (job) => {
      this.inHand.release(job.token);
    });
    worker.on("failed", (job, err) => {
      this.inHand.release(job?.token);
      // Called for every failed attempt; finishedOn is only set once BullMQ gives the job up.
      if (job?.finishedOn !== undefined) {
        this.log.error("webhook job failed for good", { list: job.data.list, error: err.message });
      }
    });
    await worker.waitUntilReady();
    if (this.options.sweep === false) return;
    await this.sweeper.start();
  }

  /**
   * Kicks every stream of a pending set whose cursor is behind its length, and takes fully delivered
   * ones out of their set. Pending sets are found by SCAN on every master. Returns how many it kicked.
   */
  async sweep(): Promise<number> {
    return this.sweeper.sweep();
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
    this.sweeper.cancel();
    const worker = this.worker;
    this.worker = undefined;
    let clean = true;
    if (!force) {
      // Takes no new job, without waiting for anything (unlike BullMQ's own graceful stops).
      await worker?.pause(true);
      clean = await settlesBy(Promise.all([this.sweeper.running, this.inHand.done()]), deadlineMs);
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

  private producer(): DeliveryQueue {
    if (this.queue !== undefined) return this.queue;
    if (this.closed) throw new Error("the webhook outbox is closed");
    const { queue, connection } = openDeliveryQueue(this.redis, this.options.queuePrefix, this.log);
    this.queueConnection = connection;
    this.queue = queue;
    return queue;
  }
}
