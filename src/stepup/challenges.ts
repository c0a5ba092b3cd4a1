import { newTokenSecret, secretHash, storeChallenge, TOKEN_SECRET } from "../otp/challenge.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { StepUpKeys } from "./keys.js";

const takePasskeyStep = defineScript({
  file: new URL("./take-passkey-step.lua", import.meta.url),
  keys: ["challenge"],
  argv: [],
});
import type { GrantMode } from "./needs.js";

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

const CHALLENGE_TOKEN = new RegExp(`^sc_(usr_[A-Za-z0-9_-]{22})\\.(${TOKEN_SECRET})$`);
const STEP_UP_TOKEN = new RegExp(`^st_(usr_[A-Za-z0-9_-]{22})\\.(${TOKEN_SECRET})$`);

/**
 * Step-up challenges and the tokens of completed ones. A challenge token is
 * `sc_<user_id>.<secret>`, stored beside the user's session; a step-up token is
 * `st_<user_id>.<secret>`, redeemed once at /v1/session/refresh. Redis keeps only the secret's
 * hash, in the key name (src/otp/challenge.ts), so a dump of Redis holds no usable token.
 */
export class StepUpChallenges {
  private readonly keys: StepUpKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new StepUpKeys(keys);
  }

  /**
   * A step-up challenge for the step at `state.stepIndex`; a `verify_passkey` step keeps its
   * WebAuthn challenge (`passkeyChallenge`) and a code hash no code matches.
   */
  async create(
    userId: string,
    state: StepUpState,
    expiresAtMs: number,
    codeHash: (challengeId: string) => string,
    passkeyChallenge?: string,
  ): Promise<{ token: string; key: string }> {
    const { secret, key } = await storeChallenge(this.redis, {
      keyOf: (id) => this.keys.challenge(userId, id),
      fields: {
        kind: "stepup",
        state: JSON.stringify(state),
        ...(passkeyChallenge === undefined ? {} : { passkey_challenge: passkeyChallenge }),
      },
      expiresAtMs,
      codeHash,
    });
    return { token: `sc_${userId}.${secret}`, key };
  }

  /**
   * Takes a `verify_passkey` step's challenge (take-passkey-step.lua): it answers one attempt,
   * right or wrong; a code step's challenge is left untouched (undefined).
   */
  async take(
    key: string,
  ): Promise<{ state: StepUpState; passkeyChallenge: string; expiresAtMs: number } | undefined> {
    const pairs = (await takePasskeyStep.run(this.redis, { challenge: key }, {})) as string[];
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < pairs.length; i += 2) h[pairs[i] as string] = pairs[i + 1] as string;
    if (h.kind !== "stepup" || h.state === undefined || h.passkey_challenge === undefined) return undefined;
    return {
      state: JSON.parse(h.state) as StepUpState,
      passkeyChallenge: h.passkey_challenge,
      expiresAtMs: Number(h.expires_at_ms ?? 0),
    };
  }

  read(token: string): { userId: string; id: string; key: string } | undefined {
    const m = CHALLENGE_TOKEN.exec(token);
    if (m?.[1] === undefined || m[2] === undefined) return undefined;
    const id = secretHash(m[2]);
    return { userId: m[1], id, key: this.keys.challenge(m[1], id) };
  }

  async stateOf(key: string): Promise<StepUpState | undefined> {
    const h = await this.redis.hgetall(key);
    return h.kind === "stepup" && h.state !== undefined ? (JSON.parse(h.state) as StepUpState) : undefined;
  }

  /** The step-up token of a completed challenge, redeemed once at /v1/session/refresh. */
  async createToken(userId: string, sessionKey: string, state: StepUpState, ttlMs: number): Promise<string> {
    const { secret, hash } = newTokenSecret();
    const key = this.keys.token(userId, hash);
    await this.redis
      .multi()
      .hset(key, {
        session: sessionKey,
        session_id: state.sessionId,
        scope: state.scope,
        granted_for: String(state.grantedFor),
        grant_mode: state.grantMode,
        // The session's level and authentication time once redeemed (refresh-session.lua).
        acr: "2",
        auth_time: String(Math.floor(Date.now() / 1000)),
      })
      .pexpire(key, ttlMs)
      .exec();
    return `st_${userId}.${secret}`;
  }

  readToken(token: string): { userId: string; key: string } | undefined {
    const m = STEP_UP_TOKEN.exec(token);
    if (m?.[1] === undefined || m[2] === undefined) return undefined;
    return { userId: m[1], key: this.keys.token(m[1], secretHash(m[2])) };
  }

  /** The session and scope a step-up token is for, while it is unused. */
  async tokenOwner(key: string): Promise<{ sessionId: string; scope: string } | undefined> {
    const [sessionId, scope] = await this.redis.hmget(key, "session_id", "scope");
    return sessionId == null || scope == null ? undefined : { sessionId, scope };
  }

  async remove(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
