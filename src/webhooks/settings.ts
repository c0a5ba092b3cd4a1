import { z } from "zod";
import { ConfigError, defineSettings, setting } from "../settings/define.js";

const n = () => z.coerce.number().int();

/** Webhook delivery: at least once, retried with exponential backoff for 24 h. */
export const webhookSettings = defineSettings(
  {
    WEBHOOK_TIMEOUT_MS: setting({
      schema: n().min(100).max(60_000).default(5_000),
      section: "webhooks",
      text: "Time a receiver has to answer one delivery.",
    }),
    WEBHOOK_BACKOFF_BASE_MS: setting({
      schema: n().min(10).max(600_000).default(1_000),
      section: "webhooks",
      text: "First retry delay, doubled after each failure (less up to 20% jitter).",
    }),
    WEBHOOK_BACKOFF_MAX_MS: setting({
      schema: n().min(10).max(86_400_000).default(3_600_000),
      section: "webhooks",
      text: "Longest retry delay.",
    }),
    WEBHOOK_GIVE_UP_MS: setting({
      schema: n()
        .min(1_000)
        .max(7 * 86_400_000)
        .default(86_400_000),
      section: "webhooks",
      text: "Age after which an undelivered event is no longer retried (the default is 24 h).",
    }),
    WEBHOOK_CONCURRENCY: setting({
      schema: n().min(1).max(256).default(8),
      section: "webhooks",
      text: "Event streams delivered at once, per worker.",
    }),
    WEBHOOK_ENDPOINT_CONCURRENCY: setting({
      schema: n().min(1).max(255).default(2),
      section: "webhooks",
      rule: "a whole number from 1 to 255, below `WEBHOOK_CONCURRENCY` (unset: 2, or less under a smaller `WEBHOOK_CONCURRENCY`)",
      text:
        "Event streams delivered at once to one endpoint (an account's or app subscription's receiver: " +
        "the scheme, host and port of its URL), per worker; the endpoint's other deliveries wait in the " +
        "queue without holding a slot. An endpoint that leaves 2 deliveries in a row unanswered is " +
        "paused, from `WEBHOOK_BACKOFF_BASE_MS` doubled at each pause in a row up to " +
        "`WEBHOOK_BACKOFF_MAX_MS`; its events are kept and delivered once it answers " +
        "([decisions.md](decisions.md#15-webhook-delivery)).",
    }),
    WEBHOOK_SWEEP_INTERVAL_MS: setting({
      schema: n().min(0).max(86_400_000).default(300_000),
      section: "webhooks",
      text: "How often undelivered streams are looked for after the sweep at start (`0`: only at start).",
    }),
  },
  (s, ctx) => {
    // One endpoint may not take every delivery slot: others' webhooks go on while it hangs. Unset, it
    // fits under a small WEBHOOK_CONCURRENCY, so a setting that started before still starts.
    if (!ctx.given("WEBHOOK_ENDPOINT_CONCURRENCY")) {
      return {
        ...s,
        WEBHOOK_ENDPOINT_CONCURRENCY: Math.max(
          1,
          Math.min(s.WEBHOOK_ENDPOINT_CONCURRENCY, s.WEBHOOK_CONCURRENCY - 1),
        ),
      };
    }
    if (s.WEBHOOK_ENDPOINT_CONCURRENCY >= s.WEBHOOK_CONCURRENCY) {
      throw new ConfigError(
        `invalid WEBHOOK_ENDPOINT_CONCURRENCY: must be below WEBHOOK_CONCURRENCY (${s.WEBHOOK_CONCURRENCY}), or one endpoint that hangs could hold every delivery (got ${ctx.shown("WEBHOOK_ENDPOINT_CONCURRENCY")})`,
      );
    }
    return s;
  },
);

/** Webhook delivery's settings, parsed. */
export type WebhookSettings = ReturnType<(typeof webhookSettings)["finish"]>;

/** Age after which an undelivered event is no longer retried: what its stream must outlive. */
export function giveUpAfterMs(s: Pick<WebhookSettings, "WEBHOOK_GIVE_UP_MS">): number {
  return s.WEBHOOK_GIVE_UP_MS;
}
