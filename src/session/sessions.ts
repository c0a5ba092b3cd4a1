import { createHash, randomBytes, randomUUID } from "node:crypto";
import { LuaScript, type Keys, type RedisClient } from "../redis/client.js";
import type { GrantMode } from "./identity.js";

const openSession = LuaScript.fromFile(new URL("./open-session.lua", import.meta.url));
const refreshSession = LuaScript.fromFile(new URL("./refresh-session.lua", import.meta.url));
const grantScope = LuaScript.fromFile(new URL("./grant-scope.lua", import.meta.url));
const resetPassword = LuaScript.fromFile(new URL("./reset-password.lua", import.meta.url));

export interface Grant {
  scope: string;
  untilMs: number;
  mode: GrantMode;
}

/** A token the caller holds: `<kind>_<user_id>.<id>.<secret>`; only a hash of the secret is kept. */
export function newToken(kind: string, userId: string, id: string): { token: string; hash: string } {
  const secret = randomBytes(32).toString("base64url");
  return { token: `${kind}_${userId}.${id}.${secret}`, hash: sha256(secret) };
}

export function readToken(
  kind: string,
  token: string,
): { userId: string; id: string; hash: string } | undefined {
  const m = new RegExp(
    `^${kind}_(usr_[A-Za-z0-9_-]{22})\\.([A-Za-z0-9_-]{16,43})\\.([A-Za-z0-9_-]{43})$`,
  ).exec(token);
  if (m?.[1] === undefined || m[2] === undefined || m[3] === undefined) return undefined;
  return { userId: m[1], id: m[2], hash: sha256(m[3]) };
}

function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

/**
 * Sessions live under their user's hash tag, beside the user, so a password change and the
 * consumption of its scope are one script: `sess:{<user_id>}:<session_id>` (hash: app, refresh
 * hash), `…:used` (rotated refresh hashes), `…:grants` (scope → {untilMs, mode, jti}).
 */
export class SessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly refreshLifetimeMs: number,
  ) {}

  keysOf(userId: string, sessionId: string) {
    const session = this.keys.key("sess", userId, sessionId);
    return {
      session,
      used: `${session}:used`,
      grants: `${session}:grants`,
      user: this.keys.key("user", userId),
    };
  }

  /** Opens a session; a grant given here is attached to the access token `jti`. */
  async open(
    userId: string,
    appId: string,
    jti: string,
    grant?: Grant,
  ): Promise<{ sessionId: string; refreshToken: string }> {
    const sessionId = randomBytes(16).toString("base64url");
    const refresh = newToken("rt", userId, sessionId);
    const k = this.keysOf(userId, sessionId);
    await openSession.run(
      this.redis,
      [k.session, k.grants],
      [
        JSON.stringify({
          appId,
          createdAt: new Date().toISOString(),
          refreshHash: refresh.hash,
          keepUntil: Date.now() + this.refreshLifetimeMs,
          grant: grant === undefined ? null : { ...grant, jti },
        }),
      ],
    );
    return { sessionId, refreshToken: refresh.token };
  }

  async appOf(userId: string, sessionId: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keysOf(userId, sessionId).session, "app_id")) ?? undefined;
  }

  /**
   * Rotates the refresh token (or redeems a step-up token) and returns the new refresh token and
   * the scopes of the next access token, whose `jti` single-use grants attach to.
   */
  async refresh(
    userId: string,
    sessionId: string,
    presented: { refreshHash: string } | { stepUpKey: string },
    jti: string,
  ): Promise<{ outcome: "ok"; refreshToken: string; scopes: string[] } | { outcome: "reused" | "invalid" }> {
    const k = this.keysOf(userId, sessionId);
    const next = newToken("rt", userId, sessionId);
    const stepUp = "stepUpKey" in presented ? presented.stepUpKey : k.session;
    const [outcome, ...scopes] = (await refreshSession.run(
      this.redis,
      [k.session, k.used, k.grants, stepUp],
      [
        JSON.stringify({
          now: Date.now(),
          presentedHash: "refreshHash" in presented ? presented.refreshHash : null,
          newHash: next.hash,
          jti,
          keepUntil: Date.now() + this.refreshLifetimeMs,
        }),
      ],
    )) as [string, ...string[]];
    if (outcome === "ok") return { outcome, refreshToken: next.token, scopes };
    return { outcome: outcome === "reused" ? "reused" : "invalid" };
  }

  async grant(userId: string, sessionId: string, grant: Grant): Promise<boolean> {
    const k = this.keysOf(userId, sessionId);
    return (await grantScope.run(this.redis, [k.session, k.grants], [JSON.stringify(grant)])) === 1;
  }

  async alive(userId: string, sessionId: string): Promise<boolean> {
    return (await this.redis.exists(this.keysOf(userId, sessionId).session)) === 1;
  }

  /** Scopes the session holds now. */
  async scopes(userId: string, sessionId: string): Promise<string[]> {
    const grants = await this.redis.hgetall(this.keysOf(userId, sessionId).grants);
    const now = Date.now();
    return Object.entries(grants)
      .filter(([, g]) => (JSON.parse(g) as { untilMs: number }).untilMs > now)
      .map(([s]) => s)
      .sort();
  }

  async end(userId: string, sessionId: string): Promise<boolean> {
    const k = this.keysOf(userId, sessionId);
    return (await this.redis.del(k.session, k.used, k.grants)) > 0;
  }

  async resetPassword(
    userId: string,
    sessionId: string,
    args: { scope: string; jti: string; passwordHash: string },
  ): Promise<"ok" | "no_session" | "insufficient_scope"> {
    const k = this.keysOf(userId, sessionId);
    return (await resetPassword.run(
      this.redis,
      [k.session, k.grants, k.user],
      [JSON.stringify({ ...args, now: Date.now() })],
    )) as "ok" | "no_session" | "insufficient_scope";
  }
}

export { randomUUID as newJti };
