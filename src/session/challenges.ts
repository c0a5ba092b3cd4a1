import { createHash, randomBytes } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import type { GrantMode, Identifier } from "./identity.js";

export interface StepSpec {
  order: number;
  key: string;
  expirationDuration: number;
}

/** What a step-up challenge carries from step to step. */
export interface StepUpState {
  sessionId: string;
  appId: string;
  scope: string;
  grantedFor: number;
  grantMode: GrantMode;
  steps: StepSpec[];
  stepIndex: number;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Challenges answered with a code. A token is `<kind>_<secret>` (login) or
 * `<kind>_<user_id>.<secret>` (step-up, stored beside the user's session); Redis keeps only the
 * secret's hash, in the key name, so a dump of Redis holds no usable token.
 */
export class ChallengeStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** A login challenge, keyed by its own hash. */
  async createLogin(
    appId: string,
    identifier: Identifier,
    expiresAtMs: number,
    codeHash: (challengeId: string) => string,
  ): Promise<{ token: string; key: string }> {
    const secret = randomBytes(32).toString("base64url");
    const id = sha256(secret);
    const key = this.keys.key("chal", id);
    await this.redis
      .multi()
      .hset(key, {
        kind: "login",
        app_id: appId,
        identifier_type: identifier.type,
        identifier_value: identifier.value,
        code_hash: codeHash(id),
        status: "pending",
        checks: "0",
        validated: "0",
        expires_at_ms: String(expiresAtMs),
      })
      .pexpireat(key, expiresAtMs + 3_600_000)
      .exec();
    return { token: `lc_${secret}`, key };
  }

  readLogin(token: string): { id: string; key: string } | undefined {
    const m = /^lc_([A-Za-z0-9_-]{43})$/.exec(token);
    if (m?.[1] === undefined) return undefined;
    const id = sha256(m[1]);
    return { id, key: this.keys.key("chal", id) };
  }

  async loginOf(key: string): Promise<{ appId: string; identifier: Identifier } | undefined> {
    const h = await this.redis.hgetall(key);
    if (h.kind !== "login" || h.app_id === undefined) return undefined;
    return {
      appId: h.app_id,
      identifier: {
        type: h.identifier_type === "email_address" ? "email_address" : "phone_number",
        value: h.identifier_value ?? "",
      },
    };
  }

  /** A step-up challenge for the step at `state.stepIndex`. */
  async createStepUp(
    userId: string,
    state: StepUpState,
    expiresAtMs: number,
    codeHash: (challengeId: string) => string,
  ): Promise<{ token: string; key: string }> {
    const secret = randomBytes(32).toString("base64url");
    const id = sha256(secret);
    const key = this.keys.key("chal", userId, id);
    await this.redis
      .multi()
      .hset(key, {
        kind: "stepup",
        state: JSON.stringify(state),
        code_hash: codeHash(id),
        status: "pending",
        checks: "0",
        validated: "0",
        expires_at_ms: String(expiresAtMs),
      })
      .pexpireat(key, expiresAtMs + 3_600_000)
      .exec();
    return { token: `sc_${userId}.${secret}`, key };
  }

  readStepUp(token: string): { userId: string; id: string; key: string } | undefined {
    const m = /^sc_(usr_[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (m?.[1] === undefined || m[2] === undefined) return undefined;
    const id = sha256(m[2]);
    return { userId: m[1], id, key: this.keys.key("chal", m[1], id) };
  }

  async stepUpOf(key: string): Promise<StepUpState | undefined> {
    const h = await this.redis.hgetall(key);
    return h.kind === "stepup" && h.state !== undefined ? (JSON.parse(h.state) as StepUpState) : undefined;
  }

  /** The step-up token of a completed challenge, redeemed once at /v1/session/refresh. */
  async createStepUpToken(
    userId: string,
    sessionKey: string,
    state: StepUpState,
    ttlMs: number,
  ): Promise<string> {
    const secret = randomBytes(32).toString("base64url");
    const key = this.stepUpTokenKey(userId, sha256(secret));
    await this.redis
      .multi()
      .hset(key, {
        session: sessionKey,
        session_id: state.sessionId,
        scope: state.scope,
        granted_for: String(state.grantedFor),
        grant_mode: state.grantMode,
      })
      .pexpire(key, ttlMs)
      .exec();
    return `st_${userId}.${secret}`;
  }

  readStepUpToken(token: string): { userId: string; key: string } | undefined {
    const m = /^st_(usr_[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (m?.[1] === undefined || m[2] === undefined) return undefined;
    return { userId: m[1], key: this.stepUpTokenKey(m[1], sha256(m[2])) };
  }

  /** The session and scope a step-up token is for, while it is unused. */
  async stepUpTokenOwner(key: string): Promise<{ sessionId: string; scope: string } | undefined> {
    const [sessionId, scope] = await this.redis.hmget(key, "session_id", "scope");
    return sessionId == null || scope == null ? undefined : { sessionId, scope };
  }

  private stepUpTokenKey(userId: string, hash: string): string {
    return this.keys.key("sut", userId, hash);
  }

  async remove(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
