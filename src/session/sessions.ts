import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { GrantMode } from "./identity.js";
import { SessionKeys } from "./keys.js";

const file = (name: string) => new URL(`./${name}.lua`, import.meta.url);
const openSession = defineScript({
  file: file("open-session"),
  keys: ["session", "grants", "index"],
  argv: ["args"],
});
const refreshSession = defineScript({
  file: file("refresh-session"),
  keys: ["session", "used", "grants", "stepUp", "index"],
  argv: ["args"],
});
const keepAnswer = defineScript({
  file: file("keep-answer"),
  keys: ["session"],
  argv: ["successor", "sealed"],
});
const grantScope = defineScript({
  file: file("grant-scope"),
  keys: ["session", "grants"],
  argv: ["args"],
});
const tokenScopes = defineScript({
  file: file("token-scopes"),
  keys: ["session", "grants"],
  argv: ["now", "jti"],
});
/** The other sessions' keys follow as `rest`: session, used and grants of each, in order. */
const resetPassword = defineScript({
  file: file("reset-password"),
  keys: ["session", "grants", "user", "index"],
  rest: "other",
  argv: ["args"],
});

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
 * How the session's user logged in: RFC 8176 `amr` values, the authentication level (`acr`,
 * docs/session-api.md#authentication-level) and the time of the last authentication (seconds).
 */
export interface SessionLogin {
  amr: string[];
  acr: Acr;
  authTime: number;
}

/** The authentication levels: "1" a code or a password, "2" a passkey with user verification, or a step-up. */
export const ACR_VALUES = ["1", "2"] as const;
export type Acr = (typeof ACR_VALUES)[number];

/**
 * Sessions live under their user's hash tag, beside the user, so a password change, the
 * consumption of its scope and the end of the user's other sessions are one script:
 * `sess:{<user_id>}:<session_id>` (hash: app, refresh hash, amr, auth_time), `…:used` (rotated
 * refresh hashes), `…:grants` (scope → {untilMs, mode, jti}), and the user's index
 * `sessions:{<user_id>}` (sorted set: session id scored by the time its keys expire). The scripts
 * that open, refresh and end sessions keep the index, and drop the entries of expired sessions,
 * so it holds at most the sessions alive now and expires with the last of them.
 */
export class SessionStore {
  private readonly keys: SessionKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly refreshLifetimeMs: number,
    /** REFRESH_REUSE_GRACE_SECONDS in ms: 0 keeps the strict rule (docs/session-api.md#refresh). */
    private readonly reuseGraceMs = 0,
  ) {
    this.keys = new SessionKeys(keys);
  }

  keysOf(userId: string, sessionId: string) {
    const k = this.keys;
    return {
      session: k.session(userId, sessionId),
      used: k.sessionUsed(userId, sessionId),
      grants: k.sessionGrants(userId, sessionId),
      user: k.user(userId),
      index: k.sessions(userId),
    };
  }

  /** Opens a session; a grant given here is attached to the access token `jti`. */
  async open(
    userId: string,
    appId: string,
    jti: string,
    login: { amr: string[]; acr?: Acr; grant?: Grant },
  ): Promise<{ sessionId: string; refreshToken: string; login: SessionLogin }> {
    const sessionId = randomBytes(16).toString("base64url");
    const refresh = newToken("rt", userId, sessionId);
    const k = this.keysOf(userId, sessionId);
    const now = Date.now();
    const authTime = Math.floor(now / 1000);
    await openSession.run(
      this.redis,
      { session: k.session, grants: k.grants, index: k.index },
      {
        args: JSON.stringify({
          sessionId,
          appId,
          createdAt: new Date(now).toISOString(),
          refreshHash: refresh.hash,
          amr: login.amr.join(" "),
          acr: login.acr ?? "1",
          authTime,
          now,
          keepUntil: now + this.refreshLifetimeMs,
          grant: login.grant === undefined ? null : { ...login.grant, jti },
        }),
      },
    );
    return {
      sessionId,
      refreshToken: refresh.token,
      login: { amr: login.amr, acr: login.acr ?? "1", authTime },
    };
  }

  /**
   * The app of a session and how its user logged in; undefined when it has ended. A session
   * opened before logins were recorded counts as a code login at its creation, at level "1".
   */
  async describe(
    userId: string,
    sessionId: string,
  ): Promise<{ appId: string; login: SessionLogin } | undefined> {
    const [appId, amr, authTime, createdAt, acr] = await this.redis.hmget(
      this.keysOf(userId, sessionId).session,
      "app_id",
      "amr",
      "auth_time",
      "created_at",
      "acr",
    );
    if (appId == null) return undefined;
    return {
      appId,
      login: {
        amr: amr == null ? ["otp"] : amr.split(" "),
        // Sessions opened before levels were recorded: a code or password login's.
        acr: acr === "2" ? "2" : "1",
        authTime: authTime == null ? Math.floor(Date.parse(createdAt ?? "") / 1000) || 0 : Number(authTime),
      },
    };
  }

  /**
   * Rotates the refresh token (or redeems a step-up token) and returns the new refresh token and
   * the scopes of the next access token, whose `jti` single-use grants attach to; `successor` is the
   * new token's hash, under which `keepAnswer` keeps the answer for the grace. `grace`: the token was
   * presented again within REFRESH_REUSE_GRACE_SECONDS of its first use, whose sealed answer is
   * `sealed` ('' while that use is still being answered).
   */
  async refresh(
    userId: string,
    sessionId: string,
    presented: { refreshHash: string } | { stepUpKey: string },
    jti: string,
  ): Promise<
    | { outcome: "ok"; refreshToken: string; successor: string; scopes: string[] }
    | { outcome: "grace"; sealed: string }
    | { outcome: "reused" | "invalid" }
  > {
    const k = this.keysOf(userId, sessionId);
    const next = newToken("rt", userId, sessionId);
    const stepUp = "stepUpKey" in presented ? presented.stepUpKey : k.session;
    const [outcome, ...rest] = (await refreshSession.run(
      this.redis,
      { session: k.session, used: k.used, grants: k.grants, stepUp, index: k.index },
      {
        args: JSON.stringify({
          sessionId,
          now: Date.now(),
          presentedHash: "refreshHash" in presented ? presented.refreshHash : null,
          newHash: next.hash,
          jti,
          keepUntil: Date.now() + this.refreshLifetimeMs,
          graceMs: this.reuseGraceMs,
        }),
      },
    )) as [string, ...string[]];
    if (outcome === "ok") return { outcome, refreshToken: next.token, successor: next.hash, scopes: rest };
    if (outcome === "grace") return { outcome, sealed: rest[0] ?? "" };
    return { outcome: outcome === "reused" ? "reused" : "invalid" };
  }

  /** Keeps a first use's sealed answer for the grace, while `successor` is the session's token. */
  async keepAnswer(userId: string, sessionId: string, successor: string, sealed: string): Promise<void> {
    if (this.reuseGraceMs === 0) return;
    await keepAnswer.run(
      this.redis,
      { session: this.keysOf(userId, sessionId).session },
      { successor, sealed },
    );
  }

  /** The sealed answer a first use kept ('' until it is kept, or once the session moved on). */
  async keptAnswer(userId: string, sessionId: string): Promise<string> {
    return (await this.redis.hget(this.keysOf(userId, sessionId).session, "gans")) ?? "";
  }

  async grant(userId: string, sessionId: string, grant: Grant): Promise<boolean> {
    const k = this.keysOf(userId, sessionId);
    const keys = { session: k.session, grants: k.grants };
    const [status] = (await grantScope.run(this.redis, keys, { args: JSON.stringify(grant) })) as [
      "granted" | "no_session",
    ];
    return status === "granted";
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

  /**
   * The scopes the session's access token `jti` holds now, or undefined once the session has
   * ended, in one round trip: its live grants, a single-use one only for the token it is attached
   * to, so a consumed one is gone at once.
   */
  async tokenScopes(userId: string, sessionId: string, jti: string): Promise<string[] | undefined> {
    const k = this.keysOf(userId, sessionId);
    const [status, ...scopes] = (await tokenScopes.run(
      this.redis,
      { session: k.session, grants: k.grants },
      { now: Date.now(), jti },
    )) as ["alive" | "ended", ...string[]];
    return status === "alive" ? scopes : undefined;
  }

  async end(userId: string, sessionId: string): Promise<boolean> {
    const k = this.keysOf(userId, sessionId);
    const [deleted] = (await this.redis
      .multi()
      .del(k.session, k.used, k.grants)
      .zrem(k.index, sessionId)
      .exec()) as [[Error | null, number], [Error | null, number]];
    if (deleted[0] !== null) throw deleted[0];
    return deleted[1] > 0;
  }

  /**
   * Writes a new password and consumes the scope that allows it, and ends every other session of
   * the user (their access and refresh tokens stop working), in one script; the session that
   * changed it stays. Returns the ids of the sessions it ended.
   */
  async resetPassword(
    userId: string,
    sessionId: string,
    args: { scope: string; jti: string; passwordHash: string },
  ): Promise<{ outcome: "ok"; ended: string[] } | { outcome: "no_session" | "insufficient_scope" }> {
    const k = this.keysOf(userId, sessionId);
    // The other sessions' keys must be named to the script: it reads the index here, and the
    // script refuses (`stale`, nothing written) when a session opened meanwhile is not among them.
    for (let attempt = 0; ; attempt++) {
      const others = (await this.redis.zrangebyscore(k.index, Date.now(), "+inf")).filter(
        (id) => id !== sessionId && /^[A-Za-z0-9_-]{16,43}$/.test(id),
      );
      const otherKeys = others.flatMap((id) => {
        const o = this.keysOf(userId, id);
        return [o.session, o.used, o.grants];
      });
      const [outcome, ...ended] = (await resetPassword.run(
        this.redis,
        { session: k.session, grants: k.grants, user: k.user, index: k.index },
        { args: JSON.stringify({ ...args, sessionId, others, now: Date.now() }) },
        otherKeys,
      )) as [string, ...string[]];
      if (outcome === "ok") return { outcome, ended };
      if (outcome === "no_session" || outcome === "insufficient_scope") return { outcome };
      if (attempt >= MAX_RESET_ATTEMPTS) {
        throw new Error("the user's sessions kept changing during a password change");
      }
    }
  }
}

/** Index reads a password change makes while logins of the same user keep opening sessions. */
const MAX_RESET_ATTEMPTS = 5;

export { randomUUID as newJti };
