import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";

const n = () => z.coerce.number().int();

/** Delivery routes (docs/settings.md#delivery-routes): how a route's strategy and circuits judge providers. */
export const deliverySettings = defineSettings({
  ROUTE_WINDOW_SECONDS: setting({
    schema: n()
      .min(60)
      .max(7 * 86_400)
      .default(3_600),
    section: "routing",
    text: "The window over which the `conversion` strategy compares providers for a destination.",
  }),
  ROUTE_EXPLORE_SHARE: setting({
    schema: z.coerce.number().min(0).max(0.5).default(0.1),
    section: "routing",
    rule: "a number from 0 to 0.5",
    text: "The least share of a `conversion` route's sends kept on its other providers, so their figures stay fresh.",
  }),
  ROUTE_MIN_SENDS: setting({
    schema: n().min(1).max(10_000).default(20),
    section: "routing",
    text: "Sends a provider needs at a destination before `conversion` judges it; until then it counts as best.",
  }),
  PROVIDER_CIRCUIT_FAILURES: setting({
    schema: n().min(1).max(1_000).default(5),
    section: "routing",
    text: "Failed submits in a row after which a provider is skipped.",
  }),
  PROVIDER_CIRCUIT_OPEN_SECONDS: setting({
    schema: n().min(1).max(3_600).default(30),
    section: "routing",
    text: "How long a provider is skipped before one message probes it again.",
  }),
  STATUS_TOKEN_FAILURES_IP: setting({
    schema: window.default({ limit: 30, windowSeconds: 300 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Wrong delivery-report tokens (`POST /v1/delivery/status/{provider}`), and wrong signatures and verify " +
      "tokens at the WhatsApp webhook (`/v1/whatsapp/webhook`), per client address; while the window is full " +
      "its wrong ones get 429 with `Retry-After`, and a right one is still served.",
  }),
  DELIVERY_STATS_RETENTION_DAYS: setting({
    schema: n().min(1).max(90).default(8),
    section: "retention",
    text:
      "How long the hourly delivery counters of `ringfence routes insights` are kept " +
      "([capacity.md](capacity.md#delivery-counters)).",
  }),
});

/** Delivery routes' settings, parsed. */
export type DeliverySettings = ReturnType<(typeof deliverySettings)["finish"]>;
