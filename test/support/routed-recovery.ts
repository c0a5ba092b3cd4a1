import { silentLogger } from "../../src/log.js";
import type { Config } from "../../src/config.js";
import type { Registry } from "../../src/app.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { Router } from "../../src/delivery/router.js";
import { RouteStore } from "../../src/delivery/routes.js";
import { DeliveryStats } from "../../src/delivery/stats.js";
import { openProviders, parseDeliveryProviders } from "../../src/messaging/providers.js";
import { HoldRecovery } from "../../src/verify/holds.js";

/**
 * The hold recovery of a service whose DELIVERY_PROVIDERS are `declared` (JSON entries), over
 * `app`'s Redis: it re-sends through the delivery router's providers, as the verify module makes it.
 * With `aheadMs`, its clock is that far ahead, so that holds are past their deadline now.
 */
export function routedRecovery(
  app: { registry: Registry; config: Config },
  declared: readonly object[],
  aheadMs = 0,
): HoldRecovery {
  const { registry, config } = app;
  const keys = new DeliveryKeys(registry.keys);
  const specs = parseDeliveryProviders(JSON.stringify(declared));
  const router = new Router(openProviders(specs, { log: silentLogger }), {
    store: new RouteStore(registry.redis, keys),
    stats: new DeliveryStats(registry.redis, keys, {
      windowSeconds: config.ROUTE_WINDOW_SECONDS,
      retentionDays: config.DELIVERY_STATS_RETENTION_DAYS,
    }),
    config,
    log: silentLogger,
  });
  return new HoldRecovery({
    config,
    store: registry.verify,
    sms: router,
    secrets: registry.secrets,
    log: silentLogger,
    now: () => Date.now() + aheadMs,
  });
}
