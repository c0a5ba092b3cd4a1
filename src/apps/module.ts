import type { Module, SharedParts } from "../lifecycle/module.js";
import { keyed, type CallerAuthenticator } from "../rpc/binding.js";
import type { WebhooksModule } from "../webhooks/module.js";
import type { StoredApp } from "./app.js";
import { appHandlerSets } from "./handlers.js";
import { APP_CALLER, type AppStore } from "./store.js";
import { APP_WEBHOOK_REF_KIND, AppWebhooks, appWebhookSecret, type AppEvents } from "./webhooks.js";

export interface AppsModule extends Module {
  /** The authentication chain of management calls: the app of the request and its key. */
  authenticate: CallerAuthenticator<StoredApp>;
  /** The app's webhook events, emitted by sessions, step-up and OAuth clients. */
  events: AppEvents;
  /** The app operations the session and OAuth contracts carry, for their bindings. */
  handlers: ReturnType<typeof appHandlerSets>;
}

/** Apps: their management keys, scopes and webhook subscriptions (whose secrets sign their streams). */
/** What the apps module takes of the process (src/registry.ts gives it). */
export interface AppsNeeds extends Pick<SharedParts, "log" | "redis" | "keys" | "secrets" | "outbound"> {
  apps: AppStore;
}

export function appsModule(r: AppsNeeds, webhooks: WebhooksModule): AppsModule {
  webhooks.resolvers.register(APP_WEBHOOK_REF_KIND, (_id, ref) =>
    appWebhookSecret(r.redis, r.keys, r.secrets, ref),
  );
  // Streams must outlive the longest retry window of the outbox.
  const events = new AppWebhooks(r.redis, r.keys, r.secrets, webhooks.outbox, r.log, {
    streamTtlMs: Math.max(25 * 3_600_000, webhooks.giveUpAfterMs + 3_600_000),
  });
  return {
    name: "apps",
    authenticate: keyed(APP_CALLER, r.apps.managementKey),
    events,
    handlers: appHandlerSets({ apps: r.apps, webhooks: events, outbound: r.outbound }),
  };
}
