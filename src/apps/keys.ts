import type { Keys } from "../redis/client.js";

/**
 * Every key of an app, all under its hash tag (one slot per app), whichever domain keeps
 * something of the app (names stay as stored: existing apps keep working).
 */
export class AppKeys {
  constructor(private readonly keys: Keys) {}

  /** The app (hash: name, creation time, management key hash). */
  app(appId: string): string {
    return this.keys.key("app", appId);
  }

  /** The scopes the app declared (set). */
  scopes(appId: string): string {
    return this.keys.key("app", appId, "scopes");
  }

  /** How many messages the app sent, per channel (hash). */
  messages(appId: string): string {
    return this.keys.key("app", appId, "messages");
  }

  /** The app's webhook subscriptions (hash: subscription id → JSON). */
  webhooks(appId: string): string {
    return this.keys.key("app", appId, "webhooks");
  }

  /** The generation of a subscription's stream (absent = 0). */
  webhookGeneration(appId: string, subId: string): string {
    return this.keys.key("appwh", appId, subId, "gen");
  }

  /** A subscription's stream of one generation (a webhook stream list, src/webhooks/keys.ts). */
  webhookStream(appId: string, subId: string, gen: number): string {
    return this.keys.key("appwh", appId, subId, "events", String(gen));
  }

  /** The app's passkey relying party (hash: rp_id, origins JSON), kept by src/passkeys/relying-party.ts. */
  passkeys(appId: string): string {
    return this.keys.key("app", appId, "passkeys");
  }

  /** The app's step-up configuration (JSON), kept by src/stepup/store.ts. */
  stepUpConfig(appId: string): string {
    return this.keys.key("app", appId, "stepup");
  }
}
