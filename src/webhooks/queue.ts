/**
 * The BullMQ side of the outbox: the delivery queue, its jobs (one per stream and length, their data
 * `{list}`), and putting a job back for later.
 */
import { DelayedError, Queue, type Job, type Worker } from "bullmq";
import { Cluster } from "ioredis";
import { z } from "zod";
import type { Logger } from "../log.js";
import { isRedisUnavailable } from "../errors.js";
import { RedisErrorReport, type RedisClient } from "../redis/client.js";
import { hashTag } from "./keys.js";

/** The BullMQ queue (under queuePrefix) that holds delivery jobs. */
export const WEBHOOK_QUEUE_NAME = "webhooks";
export const JOB_NAME = "deliver";
export const BACKOFF_TYPE = "webhook";
/** Attempts end with giveUpAfterMs, never with a count. */
const ATTEMPTS = 1_000_000;

export const jobData = z.object({
  list: z.string().refine((list) => {
    try {
      return hashTag(list) !== "";
    } catch {
      return false;
    }
  }),
});
export type DeliveryJob = z.infer<typeof jobData>;
export const LIVE_STATES: readonly string[] = [
  "waiting",
  "delayed",
  "active",
  "prioritized",
  "waiting-children",
];

export type DeliveryQueue = Queue<DeliveryJob, string, typeof JOB_NAME>;
export type DeliveryWorker = Worker<DeliveryJob, string, typeof JOB_NAME>;
export type QueuedDelivery = Job<DeliveryJob, string, typeof JOB_NAME>;

/** BullMQ job ids may not hold ':' (list keys do) nor be integers. */
export function jobIdFor(list: string, length: number): string {
  return `${encodeURIComponent(list)}@${length}`;
}

/** Puts the job back for later without counting an attempt. */
export async function later(
  job: Job<DeliveryJob>,
  token: string | undefined,
  delayMs: number,
): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

/** The producer's queue on a duplicate of `redis`, its errors reported once per outage. */
export function openDeliveryQueue(
  redis: RedisClient,
  prefix: string,
  log: Logger,
): { queue: DeliveryQueue; connection: RedisClient } {
  const connection = redis instanceof Cluster ? redis.duplicate() : redis.duplicate();
  const queue = new Queue<DeliveryJob, string, typeof JOB_NAME>(WEBHOOK_QUEUE_NAME, {
    connection,
    prefix,
    defaultJobOptions: {
      attempts: ATTEMPTS,
      backoff: { type: BACKOFF_TYPE },
      removeOnComplete: true,
      // A job kept as failed would swallow a later kick of the same (stream, length).
      removeOnFail: true,
    },
  });
  const report = new RedisErrorReport(log, "webhook-queue");
  connection.on("error", () => undefined);
  connection.on("ready", () => {
    report.ready();
  });
  queue.on("error", (err) => {
    if (isRedisUnavailable(err)) report.error(err);
    else log.warn("webhook queue error", { error: err.message });
  });
  return { queue, connection };
}
