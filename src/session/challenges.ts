import { secretHash, storeChallenge, TOKEN_SECRET } from "../otp/challenge.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { Identifier } from "./identity.js";
import { SessionKeys } from "./keys.js";

const LOGIN_TOKEN = new RegExp(`^lc_(${TOKEN_SECRET})$`);

/**
 * Login challenges, answered with a code (step-up's are src/stepup/challenges.ts). A token is
 * `lc_<secret>`; Redis keeps only the secret's hash, in the key name (src/otp/challenge.ts), so a
 * dump of Redis holds no usable token.
 */
export class ChallengeStore {
  private readonly keys: SessionKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new SessionKeys(keys);
  }

  /** A login challenge, keyed by its own hash. */
  async createLogin(
    appId: string,
    identifier: Identifier,
    expiresAtMs: number,
    codeHash: (challengeId: string) => string,
  ): Promise<{ token: string; key: string }> {
    const { secret, key } = await storeChallenge(this.redis, {
      keyOf: (id) => this.keys.loginChallenge(id),
      fields: {
        kind: "login",
        app_id: appId,
        identifier_type: identifier.type,
        identifier_value: identifier.value,
      },
      expiresAtMs,
      codeHash,
    });
    return { token: `lc_${secret}`, key };
  }

  readLogin(token: string): { id: string; key: string } | undefined {
    const m = LOGIN_TOKEN.exec(token);
    if (m?.[1] === undefined) return undefined;
    const id = secretHash(m[1]);
    return { id, key: this.keys.loginChallenge(id) };
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

  async remove(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
