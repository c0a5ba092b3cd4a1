import { DEV_ONLY, type Config } from "./config.js";
import type { Logger } from "./log.js";
import { openRegistry, type Registry } from "./registry.js";
import type { Module } from "./lifecycle/module.js";
import { serveModules, type RunningApp as Running, type StartOptions } from "./lifecycle/lifecycle.js";
import { messagingModule } from "./messaging/module.js";
import { deliveryModule } from "./delivery/module.js";
import { webhooksModule } from "./webhooks/module.js";
import { accountsModule } from "./accounts/module.js";
import { lookupModule } from "./lookup/module.js";
import { verifyModule } from "./verify/module.js";
import { fraudModule } from "./fraud/module.js";
import { appsModule } from "./apps/module.js";
import { oauthModule } from "./oauth/module.js";
import { sessionModule } from "./session/module.js";
import { stepUpModule, stepUpTokens } from "./stepup/module.js";
import { passkeyModule } from "./passkeys/module.js";

export { openRegistry, type Registry } from "./registry.js";
export type { StartOptions } from "./lifecycle/lifecycle.js";
/** The app as it runs, with its registry. */
export type RunningApp = Running<Registry>;

/**
 * The composition root: the domain modules of the service, each built from the registry and the
 * modules it needs, in the order they start (src/lifecycle/module.ts says what a module brings).
 * `sweep`: whether this process runs the webhook outbox's recovery sweeps (one per instance).
 */
export function modules(r: Registry, sweep = true): Module[] {
  const messaging = messagingModule(r);
  const delivery = deliveryModule(r, messaging);
  const webhooks = webhooksModule(r, sweep);
  const accounts = accountsModule(r, webhooks);
  const apps = appsModule(r, webhooks);
  const oauth = oauthModule(r, apps);
  const session = sessionModule(r, { messaging, delivery, apps, oauth, stepUpTokens: stepUpTokens(r) });
  const passkeys = passkeyModule(r, { apps, session });
  return [
    messaging,
    delivery,
    webhooks,
    accounts,
    lookupModule(r, accounts),
    verifyModule(r, { delivery, webhooks, accounts, email: messaging.email }),
    fraudModule(r, accounts),
    apps,
    oauth,
    session,
    passkeys,
    stepUpModule(r, { apps, session, passkeys: passkeys.passkeys }),
  ];
}

export async function startApp(config: Config, log: Logger, options: StartOptions = {}): Promise<RunningApp> {
  for (const name of config.devDefaults) {
    log.warn(`${name}: ${DEV_ONLY[name] ?? "development default"}. Never run like this in production.`);
  }
  const registry = await openRegistry(config, log);
  return serveModules(registry, modules(registry, options.singletonDuties ?? true), options);
}
