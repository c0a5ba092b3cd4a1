import type { Module, SharedParts } from "../lifecycle/module.js";
import { createBlockingRedis, keyPrefix } from "../redis/client.js";
import type { RedisSettings } from "../settings/shared.js";
import { queuePrefix } from "./keys.js";
import { WebhookOutbox } from "./outbox.js";
import type { WebhookSettings } from "./settings.js";
import { SecretResolvers } from "./stream.js";

export interface WebhooksModule extends Module {
  outbox: WebhookOutbox;
  /** The owners of the secrets that sign streams register here, by the kind of their `secret_ref`. */
  resolvers: SecretResolvers;
  /** Age after which an undelivered event is no longer retried (WEBHOOK_GIVE_UP_MS): what a stream must outlive. */
  giveUpAfterMs: number;
}

/**
 * The signed, ordered outbox. Its BullMQ worker runs in every process (BullMQ gives a job to one
 * of them, and a per-stream lock in Redis keeps one delivery at a time per stream); `sweep`: whether
 * this process runs its recovery sweeps (one process per instance does).
 */
/** What the webhooks module takes of the process (src/registry.ts gives it). */
export interface WebhooksNeeds extends Pick<SharedParts, "log" | "redis" | "keys" | "outbound" | "metrics"> {
  config: WebhookSettings & RedisSettings;
}

export function webhooksModule(r: WebhooksNeeds, sweep: boolean): WebhooksModule {
  const { config, log, metrics } = r;
  const resolvers = new SecretResolvers();
  const outbox = new WebhookOutbox({
    redis: r.redis,
    connection: () => createBlockingRedis(config),
    keys: r.keys,
    queuePrefix: queuePrefix(keyPrefix(config)),
    resolveSecret: resolvers.resolve,
    log,
    outbound: r.outbound,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    endpointConcurrency: config.WEBHOOK_ENDPOINT_CONCURRENCY,
    sweepIntervalMs: config.WEBHOOK_SWEEP_INTERVAL_MS,
    sweep,
    backoff: {
      baseMs: config.WEBHOOK_BACKOFF_BASE_MS,
      maxDelayMs: config.WEBHOOK_BACKOFF_MAX_MS,
      giveUpAfterMs: config.WEBHOOK_GIVE_UP_MS,
    },
    onAttempt: (outcome) => {
      metrics.webhook(outcome);
    },
  });
  metrics.webhookBacklog = () => outbox.backlog();
  metrics.webhookEndpointsPaused = () => outbox.pausedEndpoints();
  return {
    name: "webhooks",
    outbox,
    giveUpAfterMs: config.WEBHOOK_GIVE_UP_MS,
    resolvers,
    background: [
      {
        start: () => outbox.start(),
        // With Redis gone the queue cannot close cleanly: it drops its connections, and what it
        // had stays in Redis for the next start.
        close: async ({ deadlineMs, redisAnswers }) => {
          const closed = await outbox.close(!redisAnswers, deadlineMs).catch((err: unknown) => {
            log.warn("webhook outbox did not close cleanly", { error: String(err) });
          });
          if (closed !== false) return true;
          log.warn("webhook deliveries cut at the shutdown deadline; they are retried after the next start");
          return false;
        },
      },
    ],
  };
}
