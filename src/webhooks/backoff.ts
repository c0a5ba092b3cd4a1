/** The retry schedule of a stream whose receiver failed: its defaults and the delay before each attempt. */
import { WebhookDeliveryError, type WebhookBackoff } from "./options.js";

const JITTER = 0.2;

/** The schedule asked for, with the defaults: 1 s first delay, 1 h cap, given up after 24 h. */
export function resolveBackoff(backoff: Partial<WebhookBackoff> | undefined): WebhookBackoff {
  return {
    baseMs: backoff?.baseMs ?? 1_000,
    maxDelayMs: backoff?.maxDelayMs ?? 3_600_000,
    giveUpAfterMs: backoff?.giveUpAfterMs ?? 86_400_000,
  };
}

/** Exponential from baseMs, capped at maxDelayMs, minus up to 20% jitter, never past the give-up time. */
export function retryDelay(backoff: WebhookBackoff, attemptsMade: number, err?: Error): number {
  const { baseMs, maxDelayMs } = backoff;
  const exponential = Math.min(maxDelayMs, baseMs * 2 ** Math.min(Math.max(attemptsMade - 1, 0), 40));
  let delay = Math.round(exponential * (1 - JITTER * Math.random()));
  if (err instanceof WebhookDeliveryError) delay = Math.min(delay, err.retryUntil - Date.now());
  return Math.max(1, delay);
}
