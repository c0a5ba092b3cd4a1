import { randomBytes } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";
import { RingfenceError } from "../errors.js";
import { callerOf, type Authenticator, type CallContext } from "../rpc/binding.js";
import { callerKey } from "../rpc/callers.js";
import { APP_ID, type StoredApp } from "./app.js";
import { AppKeys } from "./keys.js";

export const MANAGEMENT_KEY_PURPOSE = "app-management-key";
const UNKNOWN_HASH = "0".repeat(64);

/** Apps in Redis: `app:{<app_id>}` (hash) and `app:{<app_id>}:scopes` (set), one slot per app. */
export class AppStore {
  private readonly keys: AppKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly secrets: Secrets,
  ) {
    this.keys = new AppKeys(keys);
  }

  async create(name: string): Promise<{ app: StoredApp; managementApiKey: string }> {
    const appId = `app_${randomBytes(16).toString("base64url")}`;
    const managementApiKey = newSecret("rfm");
    const app: StoredApp = {
      appId,
      name,
      createdAt: new Date().toISOString(),
      managementKeyHash: this.secrets.hash(MANAGEMENT_KEY_PURPOSE, managementApiKey),
    };
    await this.redis.hset(this.keys.app(appId), {
      name,
      created_at: app.createdAt,
      management_key_hash: app.managementKeyHash,
    });
    return { app, managementApiKey };
  }

  async get(appId: string): Promise<StoredApp | undefined> {
    if (!APP_ID.safeParse(appId).success) return undefined;
    const h = await this.redis.hgetall(this.keys.app(appId));
    if (h.management_key_hash === undefined) return undefined;
    return {
      appId,
      name: h.name ?? "",
      createdAt: h.created_at ?? "",
      managementKeyHash: h.management_key_hash,
    };
  }

  /** Adds a scope (idempotently) and returns the app's scopes, sorted. */
  async addScope(appId: string, scope: string): Promise<string[]> {
    await this.redis.sadd(this.keys.scopes(appId), scope);
    return this.scopes(appId);
  }

  async scopes(appId: string): Promise<string[]> {
    return (await this.redis.smembers(this.keys.scopes(appId))).sort();
  }

  /** Counts one login or step-up message sent for the app (`ringfence apps show`). */
  async countMessage(appId: string, channel: "sms" | "email"): Promise<void> {
    await this.redis.hincrby(this.keys.messages(appId), `${channel}_sent`, 1);
  }

  async messageCounts(appId: string): Promise<{ sms_sent: number; email_sent: number }> {
    const h = await this.redis.hgetall(this.keys.messages(appId));
    return { sms_sent: Number(h.sms_sent ?? 0), email_sent: Number(h.email_sent ?? 0) };
  }

  /**
   * Checks `authorization: Bearer <management_api_key>` against the app in the path. A missing
   * header, an unknown app and another app's key all get the same 401.
   */
  /** The authenticator of management calls: the app of the request's `app_id` and its key. */
  readonly managementKey: Authenticator<StoredApp> = (ctx, request) => {
    const appId = (request as { appId?: unknown } | null)?.appId;
    return this.authenticate(typeof appId === "string" ? appId : "", ctx);
  };

  async authenticate(appId: string, ctx: CallContext): Promise<StoredApp> {
    const header = ctx.header("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const app = await this.get(appId);
    const ok = this.secrets.matches(
      MANAGEMENT_KEY_PURPOSE,
      match?.[1] ?? "",
      app?.managementKeyHash ?? UNKNOWN_HASH,
    );
    if (app === undefined || match === null || !ok) {
      throw new RingfenceError(
        "unauthorized",
        match === null
          ? "Authorization: Bearer <management_api_key> is required"
          : "unknown app, or the key is not this app's",
        { "www-authenticate": 'Bearer realm="ringfence"' },
      );
    }
    return app;
  }
}

/** The key an app is found under on a management call's context: logged by its app id. */
export const APP_CALLER = callerKey<StoredApp>("app", (a) => `app:${a.appId}`);

/** The app of a management call (put on the context by `AppStore.managementKey`). */
export function appOf(ctx: CallContext): StoredApp {
  return callerOf(ctx, APP_CALLER);
}
