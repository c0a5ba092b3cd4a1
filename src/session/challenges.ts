import { createHash, randomBytes } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import type { Identifier } from "./identity.js";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Login challenges, answered with a code (step-up's are src/stepup/challenges.ts). A token is
 * `lc_<secret>`; Redis keeps only the secret's hash, in the key name, so a dump of Redis holds no
 * usable token.
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

  async remove(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
