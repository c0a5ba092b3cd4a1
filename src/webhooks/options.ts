/** What a WebhookOutbox is built from (outbox.ts), and the error a failed delivery attempt throws. */
import type { Cluster, Redis } from "ioredis";
import type { Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { Keys, RedisClient } from "../redis/client.js";

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
